//! What PROJECT records of a kind `create api` scaffolded.

use super::*;

/// Records a controller of one of Kubernetes' own kinds, under `core: true`.
pub(super) fn record_builtin(project: &mut Project, kind: &Builtin, controller_name: Option<&str>) {
    let (group, domain) = builtin_group(kind);
    match project
        .resources
        .iter_mut()
        .find(|r| r.core && r.group == group && r.version == kind.version && r.kind == kind.kind)
    {
        Some(existing) => record_controller(existing, controller_name),
        None => project.resources.push(Resource {
            api: None,
            controller: controller_name.is_none(),
            controllers: controller_name
                .iter()
                .map(|name| NamedController {
                    name: (*name).to_owned(),
                })
                .collect(),
            core: true,
            domain,
            group,
            kind: kind.kind.to_owned(),
            plural: None,
            version: kind.version.to_owned(),
            webhooks: None,
            extra: Default::default(),
        }),
    }
}

/// Records the deploy-image plugin's options of a kind that runs an image, replacing the
/// kind's earlier ones.
pub(super) fn record_deploy_image(
    project: &mut Project,
    names: &ResourceNames,
    options: &ImageOptions,
) {
    let record = DeployImage {
        domain: project.domain.clone(),
        group: names.group.clone(),
        kind: names.kind.clone(),
        options: options.recorded.clone(),
        version: names.version.clone(),
    };
    match project
        .deploy_images
        .iter_mut()
        .find(|d| d.group == record.group && d.version == record.version && d.kind == record.kind)
    {
        Some(existing) => *existing = record,
        None => project.deploy_images.push(record),
    }
}

/// Records the kind's API and controller in its entry, made when it has none.
pub(super) fn record_resource(project: &mut Project, request: &Request) {
    let names = &request.names;
    let index = project
        .resources
        .iter()
        .position(|r| !r.core && r.is(&names.group, &names.version, &names.kind));
    let entry = match index {
        Some(index) => &mut project.resources[index],
        None => {
            project.resources.push(Resource {
                api: None,
                controller: false,
                controllers: Vec::new(),
                core: false,
                domain: project.domain.clone(),
                group: names.group.clone(),
                kind: names.kind.clone(),
                plural: None,
                version: names.version.clone(),
                webhooks: None,
                extra: Default::default(),
            });
            project.resources.last_mut().expect("just pushed")
        }
    };
    if request.resource {
        entry.api = Some(ResourceApi {
            crd_version: "v1".into(),
            namespaced: request.namespaced,
            ssa: request.ssa,
        });
        entry.plural = names.plural_overridden.then(|| names.plural.clone());
    }
    if request.controller {
        record_controller(entry, request.controller_name.as_deref());
    }
}

/// Records a controller of `resource`: the kind's own, or one named `name`.
pub(super) fn record_controller(resource: &mut Resource, name: Option<&str>) {
    match name {
        None => resource.controller = true,
        Some(name) => {
            if !resource.controllers.iter().any(|c| c.name == name) {
                resource.controllers.push(NamedController {
                    name: name.to_owned(),
                });
            }
        }
    }
}

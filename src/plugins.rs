//! kubebuilder's `--plugins` keys, as scripts written for kubebuilder pass them: the keys of
//! what rsbuilder does are accepted, the others refused by name, never ignored.

use crate::ui::UserError;

/// The Go and kustomize layouts: what rsbuilder always scaffolds, in Rust.
const LAYOUT: &[&str] = &[
    "go/v4",
    "go.kubebuilder.io/v4",
    "kustomize/v2",
    "kustomize.common.kubebuilder.io/v2",
];

/// kubebuilder's deploy-image plugin: `create api --image`.
const DEPLOY_IMAGE: &[&str] = &[
    "deploy-image/v1-alpha",
    "deploy-image.go.kubebuilder.io/v1-alpha",
];

/// kubebuilder's autoupdate plugin: `edit` adds a workflow that runs `rsbuilder alpha update`.
const AUTOUPDATE: &[&str] = &["autoupdate/v1-alpha", "autoupdate.kubebuilder.io/v1-alpha"];

/// kubebuilder's Grafana plugin: `edit` adds dashboards of the manager's metrics.
const GRAFANA: &[&str] = &["grafana/v1-alpha", "grafana.kubebuilder.io/v1-alpha"];

/// kubebuilder's Helm plugin: `edit` writes a chart from the kustomize output.
const HELM: &[&str] = &["helm/v2-alpha", "helm.kubebuilder.io/v2-alpha"];

/// The plugins only `edit` adds.
const EDIT_ONLY: &[&[&str]] = &[AUTOUPDATE, GRAFANA, HELM];

/// Whether `plugins` (already checked) asks for the autoupdate workflow.
pub fn autoupdate(plugins: &[String]) -> bool {
    plugins.iter().any(|p| AUTOUPDATE.contains(&p.trim()))
}

/// Whether `plugins` (already checked) asks for the Grafana dashboards.
pub fn grafana(plugins: &[String]) -> bool {
    plugins.iter().any(|p| GRAFANA.contains(&p.trim()))
}

/// Whether `plugins` (already checked) asks for the Helm chart.
pub fn helm(plugins: &[String]) -> bool {
    plugins.iter().any(|p| HELM.contains(&p.trim()))
}

/// Checks the `--plugins` of `command`; `deploy_image` says whether the command takes
/// kubebuilder's deploy-image plugin. Returns whether that plugin is among them.
pub fn check(command: &str, plugins: &[String], deploy_image: bool) -> Result<bool, UserError> {
    let mut has_deploy_image = false;
    for plugin in plugins {
        let plugin = plugin.trim();
        if LAYOUT.contains(&plugin) {
            continue;
        }
        if deploy_image && DEPLOY_IMAGE.contains(&plugin) {
            has_deploy_image = true;
            continue;
        }
        if EDIT_ONLY.iter().any(|keys| keys.contains(&plugin)) {
            if command == "edit" {
                continue;
            }
            return Err(UserError::new(format!(
                "plugin `{plugin}` is added to a project by `rsbuilder edit`, not by {command}"
            ))
            .help(format!(
                "drop it here, then run `rsbuilder edit --plugins={plugin}`"
            )));
        }
        let error = UserError::new(format!("unknown plugin `{plugin}` for {command}"));
        let known = if deploy_image {
            "go/v4, kustomize/v2 and deploy-image/v1-alpha (with --image)"
        } else if command == "edit" {
            "go/v4, kustomize/v2, autoupdate/v1-alpha, grafana/v1-alpha and helm/v2-alpha"
        } else {
            "go/v4 and kustomize/v2"
        };
        return Err(error.help(format!("drop it from --plugins; rsbuilder knows {known}")));
    }
    Ok(has_deploy_image)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugins(list: &[&str]) -> Vec<String> {
        list.iter().map(|p| (*p).to_owned()).collect()
    }

    #[test]
    fn kubebuilder_keys_are_accepted_or_refused_by_name() {
        assert!(!check("init", &plugins(&["go/v4"]), false).unwrap());
        assert!(
            check(
                "create api",
                &plugins(&["go.kubebuilder.io/v4", "deploy-image/v1-alpha"]),
                true
            )
            .unwrap()
        );
        let error = check("edit", &plugins(&["helm/v1-alpha"]), false).unwrap_err();
        assert_eq!(error.to_string(), "unknown plugin `helm/v1-alpha` for edit");
        assert_eq!(
            error.help_text(),
            Some(
                "drop it from --plugins; rsbuilder knows go/v4, kustomize/v2, autoupdate/v1-alpha, grafana/v1-alpha and helm/v2-alpha"
            )
        );
        assert!(!check("edit", &plugins(&["helm.kubebuilder.io/v2-alpha"]), false).unwrap());
        assert!(helm(&plugins(&["helm/v2-alpha"])));
        assert!(!helm(&plugins(&["grafana/v1-alpha"])));
        let error = check("init", &plugins(&["deploy-image/v1-alpha"]), false).unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown plugin `deploy-image/v1-alpha` for init"
        );
        let error = check(
            "init",
            &plugins(&["grafana.kubebuilder.io/v1-alpha"]),
            false,
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "plugin `grafana.kubebuilder.io/v1-alpha` is added to a project by `rsbuilder edit`, not by init"
        );
        assert!(!check("edit", &plugins(&["grafana/v1-alpha"]), false).unwrap());
        assert!(grafana(&plugins(&["grafana.kubebuilder.io/v1-alpha"])));
    }
}

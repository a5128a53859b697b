//! kubebuilder's deploy-image plugin: `create api --image` scaffolds a kind whose spec
//! describes a Deployment of the image, and the controller that runs it. This module checks
//! `--image` and the flags that go with it; the `api-image` and `controller-image` template
//! sets are its files.

use crate::cli::CreateApiArgs;
use crate::names;
use crate::project::{self, DeployImageOptions};
use crate::ui::UserError;

use super::{AddedBy, Plugin};

/// The plugin's keys.
pub const PLUGIN: Plugin = Plugin {
    key: "deploy-image/v1-alpha",
    recorded: project::DEPLOY_IMAGE,
    added_by: AddedBy::CreateApi,
    options: &[],
};

/// The flags of `--image`, checked.
#[derive(Debug, Clone)]
pub struct ImageOptions {
    pub image: String,
    pub port: Option<u16>,
    pub command: Vec<String>,
    pub run_as_user: Option<i64>,
    /// The flags as given, for PROJECT.
    pub recorded: DeployImageOptions,
}

/// Checks `--image` and the flags that go with it.
pub fn resolve(args: &CreateApiArgs) -> anyhow::Result<Option<ImageOptions>> {
    let deploy_image = crate::plugins::check("create api", &args.plugins, true)?;
    // With `--force`, the image may come from PROJECT's record (`with_recorded`): its options
    // are checked here, not by the command line.
    let Some(image) = &args.image else {
        for (given, flag) in [
            (
                args.image_container_port.is_some(),
                "--image-container-port",
            ),
            (
                args.image_container_command.is_some(),
                "--image-container-command",
            ),
            (args.run_as_user.is_some(), "--run-as-user"),
            (deploy_image, "--plugins deploy-image/v1-alpha"),
        ] {
            if given {
                return Err(
                    UserError::new(format!("{flag} can only be used with --image"))
                        .help(format!("add --image <image>, or drop {flag}"))
                        .into(),
                );
            }
        }
        return Ok(None);
    };
    names::validate_image(image)?;
    // Checked by the command line too, but PROJECT's record is not (`--force`).
    let port = args
        .image_container_port
        .as_deref()
        .map(names::container_port)
        .transpose()?;
    let run_as_user = args
        .run_as_user
        .as_deref()
        .map(names::run_as_user)
        .transpose()?;
    let command = match &args.image_container_command {
        None => Vec::new(),
        Some(text) => names::container_command(text)?,
    };
    Ok(Some(ImageOptions {
        image: image.clone(),
        port,
        command,
        run_as_user,
        recorded: DeployImageOptions {
            container_command: args.image_container_command.clone(),
            container_port: args.image_container_port.clone(),
            image: image.clone(),
            run_as_user: args.run_as_user.clone(),
        },
    }))
}

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
    let port = args.image_container_port.as_deref().map(port).transpose()?;
    let run_as_user = args.run_as_user.as_deref().map(user_id).transpose()?;
    let command = match &args.image_container_command {
        None => Vec::new(),
        Some(text) => container_command(text)?,
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

/// `--image-container-port`: a port from 1 to 65535.
fn port(text: &str) -> anyhow::Result<u16> {
    match text.parse::<u16>() {
        Ok(port) if port > 0 => Ok(port),
        _ => Err(UserError::new(format!(
            "invalid --image-container-port `{text}`: a port is a number from 1 to 65535"
        ))
        .help("pass the port the image listens on, such as `--image-container-port 11211`")
        .into()),
    }
}

/// `--run-as-user`: a user ID other than root's that a pod can run as.
fn user_id(text: &str) -> anyhow::Result<i64> {
    match text.parse::<i64>() {
        Ok(uid) if (1..=i64::from(i32::MAX)).contains(&uid) => Ok(uid),
        _ => Err(UserError::new(format!(
            "invalid --run-as-user `{text}`: a user ID is a number from 1 to 2147483647 (the pod runs as non-root)"
        ))
        .help("pass the image's non-root user, such as `--run-as-user 1001`")
        .into()),
    }
}

/// `--image-container-command`: arguments separated by commas, on one line.
fn container_command(text: &str) -> anyhow::Result<Vec<String>> {
    // An argv of one line: a newline or a tab in it is a slip of the shell far more often than
    // an argument, and a script does not fit between commas anyway.
    if text.chars().any(char::is_control) {
        return Err(UserError::new(format!(
            "invalid --image-container-command `{}`: a command is one line of arguments separated by commas, without newlines, tabs or other control characters",
            crate::ui::shown(text)
        ))
        .help("pass the command on one line, such as `--image-container-command memcached,-m,64`; for a script, edit `COMMAND` in the controller")
        .into());
    }
    let parts: Vec<String> = text.split(',').map(str::to_owned).collect();
    if parts.iter().any(|part| part.trim().is_empty()) {
        return Err(UserError::new(format!(
            "invalid --image-container-command `{text}`: it has an empty argument"
        ))
        .help("separate the command and its arguments with single commas: `memcached,-m,64`")
        .into());
    }
    Ok(parts)
}

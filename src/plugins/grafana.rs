//! kubebuilder's Grafana plugin (`edit --plugins=grafana/v1-alpha`): dashboards of the
//! manager's metrics in `grafana/`, and one of the user's own metrics from
//! `grafana/custom-metrics/config.yaml`, read again on every run.
//!
//! Every metric a dashboard queries is one the runtime exports (`runtime/src/metrics.rs`), under
//! controller-runtime's names. kubebuilder's dashboards also chart controller-runtime's
//! `workqueue_*` family; kube-runtime's controller keeps its queue to itself, so those are left
//! out rather than charted empty. `hack/e2e_local.py` scrapes a running manager and checks
//! every name.

use std::path::Path;

use serde::{Deserialize, Serialize};
#[cfg(test)]
use serde_json::Value;

use crate::project;
use crate::scaffold::{PlannedFile, Policy};
use crate::tree::Tree;
use crate::ui::UserError;

use super::{AddedBy, Plugin, Recorded};

/// The plugin's keys and options.
pub const PLUGIN: Plugin = Plugin {
    key: "grafana/v1-alpha",
    recorded: project::GRAFANA,
    added_by: AddedBy::Edit,
    options: &["--reset-dashboards"],
};

/// The plugin, as `edit` runs it: PROJECT records its key, and it writes the dashboards.
pub const GRAFANA: Recorded = Recorded {
    plugin: &PLUGIN,
    recorded: |project| project.grafana,
    record: |project| project.grafana = true,
    files: |tree, args| files(tree, args.reset_dashboards),
};

/// The user's metrics, which a re-run turns into a dashboard.
pub const CONFIG: &str = "grafana/custom-metrics/config.yaml";
/// Where the templates put the dashboard of the user's metrics.
#[cfg(test)]
const CUSTOM_DASHBOARD: &str = "grafana/custom-metrics/custom-metrics-dashboard.json";
/// Where the templates put the dashboard of the controllers.
#[cfg(test)]
const RUNTIME_DASHBOARD: &str = "grafana/controller-runtime-metrics.json";
/// Where the templates put the dashboard of the process's resources.
#[cfg(test)]
const RESOURCES_DASHBOARD: &str = "grafana/controller-resources-metrics.json";

/// The label matchers of every query: the dashboard's `job` and `namespace` variables.
const SELECTOR: &str = r#"{job="$job", namespace="$namespace"}"#;

/// The files of the plugin, from the `grafana` template set: the two dashboards of the manager
/// (kept when they exist, unless `reset`, as the autoupdate workflow is), the configuration
/// (the user's: kept when it exists, whatever the flags), and, from `grafana-custom`, the
/// dashboard of the metrics the configuration lists, if any.
pub fn files(tree: &dyn Tree, reset: bool) -> anyhow::Result<Vec<PlannedFile>> {
    let dashboard = if reset {
        Policy::Owned
    } else {
        Policy::KeepExisting
    };
    let existing = tree.read(Path::new(CONFIG)).map_err(|error| {
        UserError::new(format!("failed to read {CONFIG}: {error:#}"))
            .help("make it a readable UTF-8 file, or remove it to get the default")
    })?;
    let mut files = crate::scaffold::render_set("grafana", &tera::Context::new(), &[], |path| {
        if path == CONFIG {
            Policy::KeepExisting
        } else {
            dashboard
        }
    })?;
    let config = match existing {
        Some(text) => {
            files.retain(|file| file.path != Path::new(CONFIG));
            text
        }
        None => files
            .iter()
            .find(|file| file.path == Path::new(CONFIG))
            .map(|file| file.contents.clone())
            .expect("the grafana templates hold the configuration"),
    };
    let metrics = custom_metrics(&config)?;
    if !metrics.is_empty() {
        files.extend(crate::scaffold::render_set(
            "grafana-custom",
            &custom_context(&metrics),
            &[],
            |_| Policy::Regenerated,
        )?);
    }
    Ok(files)
}

/// One panel of the custom dashboard, in the `index`th cell of two columns.
#[derive(Serialize)]
struct Panel<'a> {
    id: usize,
    x: usize,
    y: usize,
    title: &'a str,
    expr: &'a str,
    unit: &'a str,
}

/// What the custom dashboard's template receives: a panel for each metric.
fn custom_context(metrics: &[CustomMetric]) -> tera::Context {
    let panels: Vec<Panel<'_>> = metrics
        .iter()
        .enumerate()
        .map(|(index, metric)| Panel {
            id: index + 1,
            x: (index % 2) * 12,
            y: (index / 2) * 8,
            title: &metric.title,
            expr: &metric.expr,
            unit: &metric.unit,
        })
        .collect();
    let mut context = tera::Context::new();
    context.insert("panels", &panels);
    context
}

/// One metric of the configuration, checked, with its query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomMetric {
    title: String,
    expr: String,
    unit: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Config {
    custom_metrics: Option<Vec<Item>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Item {
    metric: Option<String>,
    #[serde(rename = "type")]
    type_: Option<String>,
    expr: Option<String>,
    unit: Option<String>,
}

/// The metrics `config` lists. Unlike kubebuilder, which skips an entry it cannot chart, an
/// entry without a query is an error naming it.
pub fn custom_metrics(config: &str) -> Result<Vec<CustomMetric>, UserError> {
    let help = "each entry of customMetrics needs `metric` and a `type` (counter, gauge or histogram), or an `expr`; `unit` is optional";
    let parsed: Option<Config> = serde_yaml::from_str(config)
        .map_err(|error| UserError::new(format!("{CONFIG} is not valid: {error}")).help(help))?;
    let items = parsed.and_then(|c| c.custom_metrics).unwrap_or_default();
    let mut metrics = Vec::new();
    for (index, item) in items.into_iter().enumerate() {
        let at = |message: String| {
            UserError::new(format!("{CONFIG}: customMetrics[{index}]: {message}")).help(help)
        };
        if let Some(metric) = &item.metric
            && !is_metric_name(metric)
        {
            return Err(at(format!(
                "`{metric}` is not a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)"
            )));
        }
        let kind = item.type_.as_deref().map(str::to_ascii_lowercase);
        let expr = match (&item.expr, &item.metric, kind.as_deref()) {
            (Some(expr), _, _) if !expr.trim().is_empty() => expr.trim().to_owned(),
            (_, Some(metric), Some("counter")) => {
                format!("sum by (pod) (rate({metric}{SELECTOR}[5m]))")
            }
            (_, Some(metric), Some("gauge")) => format!("sum by (pod) ({metric}{SELECTOR})"),
            (_, Some(metric), Some("histogram")) => {
                // kubebuilder's configurations name the series itself, `_bucket` included.
                let buckets = if metric.ends_with("_bucket") {
                    metric.clone()
                } else {
                    format!("{metric}_bucket")
                };
                format!(
                    "histogram_quantile(0.90, sum by (pod, le) (rate({buckets}{SELECTOR}[5m])))"
                )
            }
            (_, Some(_), Some(other)) => {
                return Err(at(format!(
                    "type `{other}` is not counter, gauge or histogram"
                )));
            }
            (_, Some(_), None) => return Err(at("`metric` without a `type`".to_owned())),
            (_, None, _) => return Err(at("neither `metric` nor `expr`".to_owned())),
        };
        let unit = item.unit.unwrap_or_else(|| "none".to_owned());
        if unit.is_empty() || unit.chars().any(char::is_control) {
            return Err(at(format!("unit {unit:?} is not a Grafana unit")));
        }
        if let Some(first) = metrics
            .iter()
            .position(|metric: &CustomMetric| metric.expr == expr)
        {
            return Err(UserError::new(format!(
                "{CONFIG}: customMetrics[{index}] charts the same query as customMetrics[{first}] (`{expr}`)"
            ))
            .help("drop one of the two entries: each entry is one panel of the dashboard"));
        }
        metrics.push(CustomMetric {
            title: item.metric.unwrap_or_else(|| expr.clone()),
            expr,
            unit,
        });
    }
    Ok(metrics)
}

fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// The metric names the manager's dashboards query, for the tests.
#[cfg(test)]
fn queried_metrics(dashboard: &Value) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            let mut rest = expr;
            while let Some(at) = rest.find('{') {
                let name: String = rest[..at]
                    .chars()
                    .rev()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                names.insert(name);
                rest = &rest[rest[at..].find('}').map_or(rest.len(), |end| at + end + 1)..];
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runtime exports these (`runtime/src/metrics.rs`); hack/e2e_local.py checks them on a
    /// running manager.
    #[test]
    fn the_dashboards_query_only_what_the_runtime_exports() {
        let queried: std::collections::BTreeSet<String> = dashboards()
            .iter()
            .flat_map(|(_, dashboard)| queried_metrics(dashboard))
            .collect();
        let expected = [
            "controller_runtime_active_workers",
            "controller_runtime_reconcile_errors_total",
            "controller_runtime_reconcile_time_seconds_bucket",
            "controller_runtime_reconcile_total",
            "leader_election_master_status",
            "process_cpu_seconds_total",
            "process_max_fds",
            "process_open_fds",
            "process_resident_memory_bytes",
            "process_start_time_seconds",
        ];
        assert_eq!(queried.into_iter().collect::<Vec<_>>(), expected);
    }

    /// The files of a project without a configuration, parsed.
    fn dashboards() -> Vec<(std::path::PathBuf, Value)> {
        files(&crate::tree::Memory::default(), false)
            .unwrap()
            .into_iter()
            .filter(|file| file.path.extension().is_some_and(|e| e == "json"))
            .map(|file| (file.path, serde_json::from_str(&file.contents).unwrap()))
            .collect()
    }

    #[test]
    fn the_custom_dashboard_charts_each_metric_as_written_two_to_a_row() {
        let metrics = custom_metrics(
            "customMetrics:\n- metric: foo_total\n  type: counter\n- metric: bar_seconds\n  type: histogram\n  unit: s\n- expr: sum(up) \"quoted\" \\\\ é {{pod}}\n",
        )
        .unwrap();
        let rendered =
            crate::scaffold::render_set("grafana-custom", &custom_context(&metrics), &[], |_| {
                Policy::Owned
            })
            .unwrap();
        assert_eq!(rendered[0].path, Path::new(CUSTOM_DASHBOARD));
        let dashboard: Value = serde_json::from_str(&rendered[0].contents).unwrap();
        let panels = dashboard["panels"].as_array().unwrap();
        assert_eq!(panels.len(), 3);
        for (index, (panel, metric)) in panels.iter().zip(&metrics).enumerate() {
            assert_eq!(panel["title"], metric.title.as_str());
            assert_eq!(panel["targets"][0]["expr"], metric.expr.as_str());
            assert_eq!(panel["targets"][0]["legendFormat"], "{{pod}}");
            assert_eq!(
                panel["fieldConfig"]["defaults"]["unit"],
                metric.unit.as_str()
            );
            assert_eq!(panel["id"], index + 1);
            assert_eq!(panel["gridPos"]["x"], (index % 2) * 12);
            assert_eq!(panel["gridPos"]["y"], (index / 2) * 8);
        }
        assert_eq!(metrics[2].expr, "sum(up) \"quoted\" \\\\ é {{pod}}");
        assert_eq!(dashboard["title"], "Custom Metrics");
        // Without a configuration, the plugin writes the manager's two dashboards.
        let paths: Vec<_> = dashboards().into_iter().map(|(path, _)| path).collect();
        assert_eq!(
            paths,
            [Path::new(RESOURCES_DASHBOARD), Path::new(RUNTIME_DASHBOARD)]
        );
    }

    #[test]
    fn custom_metrics_get_a_query_by_type_or_are_refused_by_entry() {
        let metrics = custom_metrics(
            "customMetrics:\n- metric: foo_total\n  type: counter\n- metric: bar_seconds\n  type: histogram\n  unit: s\n- expr: sum(up)\n",
        )
        .unwrap();
        assert_eq!(
            metrics[0].expr,
            "sum by (pod) (rate(foo_total{job=\"$job\", namespace=\"$namespace\"}[5m]))"
        );
        assert_eq!(
            metrics[1].expr,
            "histogram_quantile(0.90, sum by (pod, le) (rate(bar_seconds_bucket{job=\"$job\", namespace=\"$namespace\"}[5m])))"
        );
        assert_eq!(
            (metrics[1].unit.as_str(), metrics[2].title.as_str()),
            ("s", "sum(up)")
        );
        assert_eq!(custom_metrics("---\ncustomMetrics:\n").unwrap(), []);
        let kubebuilders =
            custom_metrics("customMetrics:\n- metric: foo_seconds_bucket\n  type: Histogram\n")
                .unwrap();
        assert!(
            kubebuilders[0].expr.contains("rate(foo_seconds_bucket{"),
            "{}",
            kubebuilders[0].expr
        );
        for (config, error) in [
            (
                "customMetrics:\n- metric: foo\n  type: summary\n",
                "customMetrics[0]: type `summary` is not counter, gauge or histogram",
            ),
            (
                "customMetrics:\n- metric: foo\n",
                "customMetrics[0]: `metric` without a `type`",
            ),
            (
                "customMetrics:\n- metric: ok\n  type: gauge\n- unit: s\n",
                "customMetrics[1]: neither `metric` nor `expr`",
            ),
            (
                "customMetrics:\n- metric: 'a\"b'\n  type: gauge\n",
                "customMetrics[0]: `a\"b` is not a Prometheus metric name",
            ),
            (
                "customMetrics:\n- metric: foo_total\n  type: counter\n- expr: up\n- metric: foo_total\n  type: Counter\n",
                "customMetrics[2] charts the same query as customMetrics[0] (`sum by (pod) (rate(foo_total",
            ),
            (
                "customMetrics:\n- metric: a\n  kind: gauge\n",
                "unknown field `kind`",
            ),
        ] {
            let message = custom_metrics(config).unwrap_err().to_string();
            assert!(message.contains(error), "{message}");
            assert!(message.starts_with(CONFIG), "{message}");
        }
    }

    #[test]
    fn dashboards_are_valid_json_and_the_same_every_time() {
        let runtime = |files: Vec<PlannedFile>| {
            files
                .into_iter()
                .find(|file| file.path == Path::new(RUNTIME_DASHBOARD))
                .unwrap()
                .contents
        };
        let first = runtime(files(&crate::tree::Memory::default(), false).unwrap());
        assert_eq!(
            first,
            runtime(files(&crate::tree::Memory::default(), true).unwrap())
        );
        let parsed: Value = serde_json::from_str(&first).unwrap();
        assert_eq!(parsed["panels"].as_array().unwrap().len(), 5);
        let ids: Vec<u64> = parsed["panels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_u64().unwrap())
            .collect();
        assert_eq!(ids, [1, 2, 3, 4, 5]);
    }
}

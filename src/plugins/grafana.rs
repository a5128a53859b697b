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

use serde::Deserialize;
use serde_json::{Value, json};

use crate::cli::EditArgs;
use crate::project::{self, Project};
use crate::scaffold::{Plan, PlannedFile, Policy};
use crate::ui::UserError;

use super::{AddedBy, EditPlugin, Plugin, edit_words};

/// The plugin's keys and options.
pub const PLUGIN: Plugin = Plugin {
    key: "grafana/v1-alpha",
    recorded: project::GRAFANA,
    added_by: AddedBy::Edit,
    options: &["--reset-dashboards"],
};

/// The plugin, as `edit` runs it.
pub struct Grafana;

impl EditPlugin for Grafana {
    fn plugin(&self) -> &'static Plugin {
        &PLUGIN
    }

    fn record(&self, _args: &EditArgs, project: &mut Project) -> anyhow::Result<()> {
        project.grafana = true;
        Ok(())
    }

    fn plan(
        &self,
        root: &Path,
        _project: &Project,
        args: &EditArgs,
        plan: &mut Plan,
    ) -> anyhow::Result<()> {
        plan.files.extend(files(root, args.reset_dashboards)?);
        Ok(())
    }

    fn replay(&self, project: &Project) -> Option<Vec<String>> {
        project.grafana.then(|| edit_words(PLUGIN.key, &[]))
    }
}

/// The user's metrics, which a re-run turns into a dashboard.
pub const CONFIG: &str = "grafana/custom-metrics/config.yaml";
/// The dashboard of the user's metrics.
pub const CUSTOM_DASHBOARD: &str = "grafana/custom-metrics/custom-metrics-dashboard.json";
/// The dashboard of the controllers.
pub const RUNTIME_DASHBOARD: &str = "grafana/controller-runtime-metrics.json";
/// The dashboard of the process's resources.
pub const RESOURCES_DASHBOARD: &str = "grafana/controller-resources-metrics.json";

/// The label matchers of every query: the dashboard's `job` and `namespace` variables.
const SELECTOR: &str = r#"{job="$job", namespace="$namespace"}"#;

/// The files of the plugin: the two dashboards of the manager (kept when they exist, unless
/// `reset`, as the autoupdate workflow is), the configuration (the user's: kept when it exists,
/// whatever the flags), and the dashboard of the metrics it lists, if any.
pub fn files(root: &Path, reset: bool) -> anyhow::Result<Vec<PlannedFile>> {
    let dashboard = if reset {
        Policy::Owned
    } else {
        Policy::KeepExisting
    };
    let mut files = vec![
        PlannedFile {
            path: RUNTIME_DASHBOARD.into(),
            contents: render(&runtime_dashboard()),
            policy: dashboard,
        },
        PlannedFile {
            path: RESOURCES_DASHBOARD.into(),
            contents: render(&resources_dashboard()),
            policy: dashboard,
        },
    ];
    let config = match std::fs::read_to_string(root.join(CONFIG)) {
        Ok(text) => text,
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            return Err(UserError::new(format!("failed to read {CONFIG}: {error}"))
                .help("make it a readable UTF-8 file, or remove it to get the default")
                .into());
        }
        Err(_) => {
            let text = crate::scaffold::render_set("grafana", &tera::Context::new(), &[], |_| {
                Policy::Owned
            })?
            .into_iter()
            .find(|file| file.path == Path::new(CONFIG))
            .map(|file| file.contents)
            .expect("the grafana templates hold the configuration");
            files.push(PlannedFile {
                path: CONFIG.into(),
                contents: text.clone(),
                policy: Policy::KeepExisting,
            });
            text
        }
    };
    let metrics = custom_metrics(&config)?;
    if !metrics.is_empty() {
        files.push(PlannedFile {
            path: CUSTOM_DASHBOARD.into(),
            contents: render(&custom_dashboard(&metrics)),
            policy: Policy::Regenerated,
        });
    }
    Ok(files)
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

/// A dashboard as Grafana exports it, two spaces deep, with a final newline.
fn render(dashboard: &Value) -> String {
    let mut text = serde_json::to_string_pretty(dashboard).expect("a JSON value serializes");
    text.push('\n');
    text
}

/// One query of a panel.
struct Query<'a> {
    expr: String,
    legend: &'a str,
}

fn query(expr: impl Into<String>, legend: &str) -> Query<'_> {
    Query {
        expr: expr.into(),
        legend,
    }
}

/// A time series panel of half the width, placed in the `index`th cell of two columns.
fn panel(index: usize, title: &str, description: &str, unit: &str, queries: &[Query<'_>]) -> Value {
    let targets: Vec<Value> = queries
        .iter()
        .zip('A'..)
        .map(|(query, reference)| {
            json!({
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "expr": query.expr,
                "legendFormat": query.legend,
                "refId": reference.to_string(),
            })
        })
        .collect();
    json!({
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "description": description,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "gridPos": {"h": 8, "w": 12, "x": (index % 2) * 12, "y": (index / 2) * 8},
        "id": index + 1,
        "options": {
            "legend": {"displayMode": "table", "placement": "bottom", "showLegend": true},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": targets,
        "title": title,
        "type": "timeseries",
    })
}

/// A dashboard of `panels`, with the data source, `job` and `namespace` variables, the last two
/// taken from the labels of `metric`.
fn dashboard(title: &str, metric: &str, panels: Vec<Value>) -> Value {
    let variable = |name: &str, query: String| {
        json!({
            "name": name,
            "label": name,
            "type": "query",
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "definition": query,
            "query": {"query": query, "refId": name},
            "refresh": 2,
            "sort": 1,
            "includeAll": false,
            "multi": false,
            "hide": 0,
        })
    };
    json!({
        "annotations": {"list": []},
        "editable": true,
        "graphTooltip": 1,
        "panels": panels,
        "refresh": "30s",
        "schemaVersion": 39,
        "tags": ["rsbuilder"],
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus", "hide": 0},
            variable("job", format!("label_values({metric}, job)")),
            variable("namespace", format!("label_values({metric}{{job=\"$job\"}}, namespace)")),
        ]},
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "browser",
        "title": title,
        "version": 1,
    })
}

fn runtime_dashboard() -> Value {
    let quantile = |q: &str| {
        format!(
            "histogram_quantile({q}, sum by (controller, le) (rate(controller_runtime_reconcile_time_seconds_bucket{SELECTOR}[5m])))"
        )
    };
    let panels = vec![
        panel(
            0,
            "Reconciliations per second",
            "controller_runtime_reconcile_total: reconciles per controller and result (success, error)",
            "ops",
            &[query(
                format!(
                    "sum by (controller, result) (rate(controller_runtime_reconcile_total{SELECTOR}[5m]))"
                ),
                "{{controller}} {{result}}",
            )],
        ),
        panel(
            1,
            "Reconciliation errors per second",
            "controller_runtime_reconcile_errors_total: reconciles that returned an error, each retried with a per-object backoff",
            "ops",
            &[query(
                format!(
                    "sum by (controller) (rate(controller_runtime_reconcile_errors_total{SELECTOR}[5m]))"
                ),
                "{{controller}}",
            )],
        ),
        panel(
            2,
            "Reconcile time",
            "controller_runtime_reconcile_time_seconds: the 50th, 90th and 99th percentile of the time one reconcile takes",
            "s",
            &[
                query(quantile("0.5"), "{{controller}} p50"),
                query(quantile("0.9"), "{{controller}} p90"),
                query(quantile("0.99"), "{{controller}} p99"),
            ],
        ),
        panel(
            3,
            "Reconciles in progress",
            "controller_runtime_active_workers: reconciles running at this moment",
            "short",
            &[query(
                format!("sum by (controller) (controller_runtime_active_workers{SELECTOR})"),
                "{{controller}}",
            )],
        ),
        panel(
            4,
            "Leader",
            "leader_election_master_status: 1 for the replica that holds the leader election Lease and runs the controllers",
            "short",
            &[query(
                format!("max by (pod) (leader_election_master_status{SELECTOR})"),
                "{{pod}}",
            )],
        ),
    ];
    dashboard(
        "Controller Runtime Metrics",
        "controller_runtime_reconcile_total",
        panels,
    )
}

fn resources_dashboard() -> Value {
    let panels = vec![
        panel(
            0,
            "CPU usage",
            "process_cpu_seconds_total: CPU time per second of wall time, in cores",
            "short",
            &[query(
                format!("rate(process_cpu_seconds_total{SELECTOR}[5m])"),
                "{{pod}}",
            )],
        ),
        panel(
            1,
            "Memory",
            "process_resident_memory_bytes: the manager's resident set",
            "bytes",
            &[query(
                format!("process_resident_memory_bytes{SELECTOR}"),
                "{{pod}}",
            )],
        ),
        panel(
            2,
            "Open file descriptors",
            "process_open_fds against process_max_fds",
            "short",
            &[
                query(format!("process_open_fds{SELECTOR}"), "{{pod}} open"),
                query(format!("process_max_fds{SELECTOR}"), "{{pod}} limit"),
            ],
        ),
        panel(
            3,
            "Uptime",
            "time since process_start_time_seconds: a drop is a restart",
            "s",
            &[query(
                format!("time() - process_start_time_seconds{SELECTOR}"),
                "{{pod}}",
            )],
        ),
    ];
    dashboard(
        "Controller Resources Metrics",
        "process_cpu_seconds_total",
        panels,
    )
}

fn custom_dashboard(metrics: &[CustomMetric]) -> Value {
    let panels = metrics
        .iter()
        .enumerate()
        .map(|(index, metric)| {
            panel(
                index,
                &metric.title,
                &format!("from {CONFIG}"),
                &metric.unit,
                &[query(metric.expr.clone(), "{{pod}}")],
            )
        })
        .collect();
    dashboard(
        "Custom Metrics",
        "controller_runtime_reconcile_total",
        panels,
    )
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
        let mut queried = queried_metrics(&runtime_dashboard());
        queried.extend(queried_metrics(&resources_dashboard()));
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
        let first = render(&runtime_dashboard());
        assert_eq!(first, render(&runtime_dashboard()));
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

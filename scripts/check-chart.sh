#!/usr/bin/env bash
# Runs scripts/check-chart.py in a virtualenv that has its two dependencies:
#
#   scripts/check-chart.sh HELM CHART_DIR INSTALL_YAML
#
# The virtualenv lives in ${XDG_CACHE_HOME:-$HOME/.cache}/rsbuilder/chart-venv, with pinned
# kubernetes-validate and PyYAML from PyPI; it is made once and reused while it imports both.
# Exits non-zero when the virtualenv cannot be made, and otherwise with check-chart.py's code.
set -euo pipefail

readonly REQUIREMENTS=("kubernetes-validate==1.37.0" "PyYAML==6.0.3")

die() {
    echo "error: $*" >&2
    exit 1
}

[[ $# -eq 3 ]] || die "usage: $0 HELM CHART_DIR INSTALL_YAML"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${XDG_CACHE_HOME:-$HOME/.cache}/rsbuilder/chart-venv"
python="$venv/bin/python3"

venv_ready() {
    [[ -x "$python" ]] && "$python" -c 'import kubernetes_validate, yaml' 2>/dev/null
}

if ! venv_ready; then
    command -v python3 >/dev/null || die "python3 is needed for the chart checks"
    echo "check-chart: making the virtualenv $venv" >&2
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv" \
        || die "could not make a virtualenv in $venv (is python3-venv installed?)"
    "$python" -m pip install --quiet --disable-pip-version-check "${REQUIREMENTS[@]}" \
        || die "could not install ${REQUIREMENTS[*]} into $venv"
    venv_ready || die "$venv does not import kubernetes_validate and yaml"
fi

exec "$python" "$here/check-chart.py" --helm "$1" --chart "$2" --manifests "$3"

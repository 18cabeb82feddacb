#!/bin/sh
# Build the sanitizer agent's base image (images/sanitizer) with the first container builder found:
# docker, podman or buildah (or SANITIZER_BUILDER). Where none is installed, say so and exit 2.
#   SANITIZER_IMAGE   image reference to tag (default dra-sanitizer-base:dev)
#   PYTHON_IMAGE      base image, ideally pinned by digest (default: the Dockerfile's)
#   SANITIZER_PUSH=1  push after the build and print the digest to pass as image_digest=
# Only shell built-ins besides the builder itself, so it also runs where PATH holds nothing else.
set -eu
case "$0" in */*) here=$(cd "${0%/*}/.." && pwd) ;; *) here=$(cd .. && pwd) ;; esac
context="$here/images/sanitizer"
image=${SANITIZER_IMAGE:-dra-sanitizer-base:dev}
builder=${SANITIZER_BUILDER:-}
if [ -z "$builder" ]; then
    for candidate in docker podman buildah; do
        if command -v "$candidate" >/dev/null 2>&1; then builder=$candidate; break; fi
    done
fi
if [ -z "$builder" ]; then
    echo "make sanitizer-image: no container builder found (docker, podman or buildah on PATH, or SANITIZER_BUILDER)." >&2
    echo "Install one, or build $context/Dockerfile with your CI's builder (kaniko, buildkit): see docs/sanitizer-construct.md, 'The image'." >&2
    exit 2
fi
set -- --tag "$image"
if [ -n "${PYTHON_IMAGE:-}" ]; then set -- "$@" --build-arg "PYTHON_IMAGE=$PYTHON_IMAGE"; fi
name=${builder##*/}
"$builder" build "$@" "$context"   # docker build, podman build, buildah build (= bud)
echo "built $image with $name"
if [ "${SANITIZER_PUSH:-0}" = "1" ]; then
    case "$name" in
        docker) "$builder" push "$image"
                digest=$("$builder" inspect --format '{{index .RepoDigests 0}}' "$image") ;;
        *) file="${TMPDIR:-/tmp}/sanitizer-image-digest.$$"
           "$builder" push --digestfile "$file" "$image"
           read -r digest < "$file"; rm -f "$file" ;;
    esac
    echo "pushed: $digest"
    echo "pass it as SanitizerDaemonSet(image=..., image_digest='sha256:...') (the part after '@')"
else
    echo "next: $name push $image, then pin the digest it prints (SANITIZER_PUSH=1 does both)"
fi

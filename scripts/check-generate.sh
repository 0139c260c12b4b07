#!/bin/sh
# check-generate.sh: regenerate the avo-generated assembly and fail if it
# differs from the committed files (the generator is the source of truth).
set -eu
cd "$(dirname "$0")/.."
for pkg in chachapoly fastpath; do
	(cd "$pkg" && go generate)
done
if ! git diff --exit-code -- '*.s'; then
	echo "check-generate: generated assembly differs from the committed files; run go generate and commit" >&2
	exit 1
fi
if [ -n "$(git ls-files --others --exclude-standard -- '*.s')" ]; then
	echo "check-generate: go generate made new, uncommitted assembly files" >&2
	exit 1
fi
echo "check-generate: ok"

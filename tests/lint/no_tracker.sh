#!/bin/bash
# tests/lint/no_tracker.sh: the repository speaks of the product only.
#
# Code, comments and docs explain why the product is as it is; they never
# cite a tracker's issue numbers or narrate how the tree was built, which a
# reader of the repository cannot look up. Fails (exit 1) listing each line
# that does, in the files git tracks (lock files and vendored modules left
# out).
set -u
cd "$(dirname "$0")/../.." || exit 2
pat='\bissues? #?[0-9]+|\(#[0-9]+\)|\bsession [0-9]+\b'
hits=$(git ls-files -z -- . ':!:*package-lock.json' ':!:tests/lint/no_tracker.sh' |
    xargs -0 grep -nIiE "$pat" -- 2>/dev/null)
if [ -n "$hits" ]; then
	echo "lint: tracker references (issue or session numbers):" >&2
	printf '%s\n' "$hits" >&2
	exit 1
fi
exit 0

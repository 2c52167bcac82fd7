#!/usr/bin/env bash
# Behaviour unchanged across a refactor (issue 29): detect, overlay, doctor, activate and plan over every
# bundled captured host, at another revision and at this checkout, compared after normalizing what
# differs by construction (temporary host roots, build ids, digests, the checkout's path).
# Usage (repo root): bash benchmarks/compare_outputs.sh REV    (e.g. the commit before a refactor)
# Prints the differing lines, then name=value figures; the last line is the headline.
set -uo pipefail
cd "$(dirname "$0")/.."
REV=${1:?a git revision to compare with}
PY=${PYTHON:-python}   # the project's venv (README command 1)
work=$(mktemp -d) && trap 'git worktree remove --force "$work/old" >/dev/null 2>&1; rm -rf "$work"' EXIT
git worktree add -q --detach "$work/old" "$REV" || exit 1
hosts=$(ls deepep_env/data/hosts/*.json | xargs -n1 basename | sed 's/\.json$//')
envs=$(ls env_specs/*.toml | xargs -n1 basename | sed 's/\.toml$//')
outputs() {  # repo outdir
  mkdir -p "$2"
  for h in $hosts; do
    for c in detect overlay doctor; do
      (cd "$1" && PYTHONPATH="$1" DEEPEP_ENV_STATE="$2/state" $PY -m deepep_env.cli.main $c --demo-host "$h" --json) > "$2/$c-$h.json" 2>&1
    done
    for e in $envs; do
      [ -f "$1/env_specs/$e.toml" ] || continue
      for c in plan doctor; do
        (cd "$1" && PYTHONPATH="$1" DEEPEP_ENV_STATE="$2/state" $PY -m deepep_env.cli.main $c "$e" --demo-host "$h" --json) > "$2/$c-$e-$h.json" 2>&1
      done
      (cd "$1" && PYTHONPATH="$1" DEEPEP_ENV_STATE="$2/state" $PY -m deepep_env.cli.main activate "$e" --demo-host "$h") > "$2/activate-$e-$h.txt" 2>&1
    done
  done
}
norm() {
  sed -E -e 's#/tmp/deepep-env-demo-host-[A-Za-z0-9_]+#ROOT#g; s#deepep-env-demo-host-[A-Za-z0-9_]+#NODE#g' \
         -e 's#h[0-9a-f]{10}_0#hID_0#g; s#"[0-9a-f]{16}"#"ID16"#g; s#sha256:[0-9a-f]{64}#SHA#g' \
         -e "s#$work/[on]/state#STATE#g; s#$work/old#REPO#g; s#$PWD#REPO#g" "$1"
}
outputs "$work/old" "$work/o"
outputs "$PWD" "$work/n"
total=0 differ=0
for f in "$work"/o/*.json "$work"/o/*.txt; do
  b=$(basename "$f"); total=$((total + 1))
  if ! diff -q <(norm "$f") <(norm "$work/n/$b") > /dev/null; then
    differ=$((differ + 1)); echo "== $b"; diff <(norm "$f") <(norm "$work/n/$b") | grep '^[<>]' | cut -c1-240 | head -6
  fi
done
echo "outputs_compared=$total"
echo "outputs_differing=$differ"

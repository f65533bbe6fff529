#!/usr/bin/env bash
# Every alert of a rule file has its unit tests: a group named "<alert> fires ..." and one named
# "<alert> stays quiet ..." in the promtool test file, so that an alert added without tests
# fails ctest. Usage: rules_cover_every_alert.sh RULES.yaml RULES.test.yaml
set -euo pipefail
rules="$1" tests="$2"
mapfile -t alerts < <(sed -n 's/^[[:space:]]*-[[:space:]]*alert:[[:space:]]*\([A-Za-z0-9_]*\).*/\1/p' "$rules")
if [[ ${#alerts[@]} -eq 0 ]]; then
  echo "no alert found in $rules" >&2
  exit 1
fi
missing=0
for alert in "${alerts[@]}"; do
  for kind in fires "stays quiet"; do
    if ! grep -Eq "^[[:space:]]*-[[:space:]]*name:[[:space:]]*[\"']?${alert} ${kind}( |\$)" "$tests"; then
      echo "$alert: no test group named '$alert $kind ...' in $tests" >&2
      missing=1
    fi
  done
  if ! grep -Eq "^[[:space:]]*alertname:[[:space:]]*${alert}[[:space:]]*\$" "$tests"; then
    echo "$alert: no alert_rule_test evaluates it in $tests" >&2
    missing=1
  fi
done
[[ $missing -eq 0 ]] || exit 1
echo "${#alerts[@]} alerts, each with a firing and a quiet test group: ${alerts[*]}"

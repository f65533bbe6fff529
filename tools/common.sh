# shellcheck shell=bash disable=SC2034  # its variables are used by the scripts that source it
# Shared by tools/setup.sh, tools/run.sh and tools/test.sh; source it, don't run it.
# Runs named phases, prints how long each took, and names the phase that failed.

_fastpath_timings=()

# phase <name> <command...>: runs the command as one timed phase; a failure ends the script.
phase() {
  local name="$1" start=$SECONDS rc=0
  shift
  printf '\n==> %s\n' "$name"
  "$@" || rc=$?
  local took=$((SECONDS - start))
  _fastpath_timings+=("$(printf '%-22s %5d s  %s' "$name" "$took" \
    "$([[ $rc -eq 0 ]] && echo ok || echo "FAILED (exit $rc)")")")
  if [[ $rc -ne 0 ]]; then
    printf '==> %s FAILED (exit %d) after %d s\n' "$name" "$rc" "$took" >&2
    phase_summary >&2
    exit "$rc"
  fi
  printf '==> %s: %d s\n' "$name" "$took"
}

phase_summary() {
  printf '\n==> timings\n'
  printf '    %s\n' "${_fastpath_timings[@]}"
}

# Extra CMake configure arguments, e.g. FASTPATH_CMAKE_ARGS="-DONNXRUNTIME_ROOT=/opt/ort".
fastpath_cmake_args=()
if [[ -n "${FASTPATH_CMAKE_ARGS:-}" ]]; then
  read -r -a fastpath_cmake_args <<<"$FASTPATH_CMAKE_ARGS"
fi

# Parallel build jobs: every core (CI has two); override with FASTPATH_JOBS.
fastpath_jobs="${FASTPATH_JOBS:-$(nproc)}"

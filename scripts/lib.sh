# Shared by the install scripts (sourced, not run). Set LOG_PREFIX before sourcing.

log() { echo "${LOG_PREFIX:-install}: $*" >&2; }

# Runs a command silently; on failure prints its output with every URL host redacted, then fails:
# mirror host names must not end up in logs that get shared or committed.
quiet() {
  local output
  if ! output=$("$@" 2>&1); then
    printf '%s\n' "$output" | sed -E 's#https?://[^ /]+#<mirror>#g' >&2
    log "failed: $1 $2"
    return 1
  fi
}

#!/bin/bash
# Rankscope EpilogSlurmctld: tell Rankscope the job is over and send its job record.
#
# Install as slurm.conf `EpilogSlurmctld=`; slurmctld runs it once per job, as SlurmUser,
# on the controller. The record (ids, user, name, nodelist, exit codes, output patterns,
# work dir, times, restart count, SLUID) comes from the environment only — no Slurm
# commands. The server expands the nodelist and the output patterns, opens (or finds)
# the job run's incident and starts the analysis without waiting for uploads to settle.
#
# Rules it obeys: always exit 0; a fully detached sender (setsid, no open output) so the
# controller never waits on the network; curl bounded by --max-time; absolute paths; a
# short jitter. slurmctld may run this twice after a restart: the record is posted with
# the same bytes and the same Idempotency-Key, so the second post changes nothing.
#
# Configuration: /etc/rankscope/epilog.conf (same file as the node Epilog):
#   RANKSCOPE_URL=https://rankscope.example.com
#   RANKSCOPE_TOKEN_FILE=/etc/rankscope/token   # readable by SlurmUser, ingest-only token

umask 077
set +e

RANKSCOPE_EPILOG_CONF="${RANKSCOPE_EPILOG_CONF:-/etc/rankscope/epilog.conf}"
RANKSCOPE_URL=""
RANKSCOPE_TOKEN_FILE="/etc/rankscope/token"
RANKSCOPE_MAX_TIME=30
RANKSCOPE_RETRIES=3
RANKSCOPE_EPILOG_MAX_JITTER=2
RANKSCOPE_EPILOG_FOREGROUND=0
RANKSCOPE_EPILOG_LOG=""
# shellcheck source=/dev/null
[ -r "$RANKSCOPE_EPILOG_CONF" ] && . "$RANKSCOPE_EPILOG_CONF"

CURL=/usr/bin/curl

log() {
    /usr/bin/logger -t rankscope-epilog-slurmctld -- "job ${SLURM_JOB_ID:-?}: $*" >/dev/null 2>&1
    if [ -n "$RANKSCOPE_EPILOG_LOG" ]; then
        echo "$(/usr/bin/date -u +%FT%TZ) job ${SLURM_JOB_ID:-?} controller: $*" \
            >>"$RANKSCOPE_EPILOG_LOG" 2>/dev/null
    fi
}

clean() {
    local v="${1//[^A-Za-z0-9._:+-]/_}"
    printf '%s' "${v:0:120}"
}

# A JSON string literal. Values such as the job name and comment are set by users:
# escape quotes and backslashes, drop other control characters.
json_str() {
    local s="$1"
    s="${s//\\/\\\\}"
    s="${s//\"/\\\"}"
    s="${s//$'\n'/\\n}"
    s="${s//$'\t'/\\t}"
    s="${s//[$'\x01'-$'\x1f']/}"
    printf '"%s"' "${s:0:4000}"
}

job_record() {
    local first=1 pair key var
    printf '{'
    for pair in \
        job_id:SLURM_JOB_ID cluster:SLURM_CLUSTER_NAME job_name:SLURM_JOB_NAME \
        user:SLURM_JOB_USER uid:SLURM_JOB_UID partition:SLURM_JOB_PARTITION \
        account:SLURM_JOB_ACCOUNT work_dir:SLURM_JOB_WORK_DIR \
        job_nodelist:SLURM_JOB_NODELIST num_nodes:SLURM_JOB_NUM_NODES \
        exit_status:SLURM_JOB_EXIT_CODE exit_code2:SLURM_JOB_EXIT_CODE2 \
        derived_exit_code:SLURM_JOB_DERIVED_EC start_time:SLURM_JOB_START_TIME \
        end_time:SLURM_JOB_END_TIME restart_count:SLURM_JOB_RESTART_COUNT \
        sluid:SLURM_JOB_SLUID stdout:SLURM_JOB_STDOUT stderr:SLURM_JOB_STDERR \
        comment:SLURM_JOB_COMMENT extra:SLURM_JOB_EXTRA \
        array_job_id:SLURM_ARRAY_JOB_ID array_task_id:SLURM_ARRAY_TASK_ID; do
        key="${pair%%:*}"
        var="${pair#*:}"
        [ -n "${!var+x}" ] || continue
        [ "$first" = 1 ] || printf ','
        first=0
        printf '"%s":%s' "$key" "$(json_str "${!var}")"
    done
    printf '}'
}

send() {
    local job="$1" cluster="$2" run_key="$3" exit_code="$4" signal="$5" record header code
    if [ "$RANKSCOPE_EPILOG_FOREGROUND" != "1" ] && [ "$RANKSCOPE_EPILOG_MAX_JITTER" -gt 0 ] 2>/dev/null; then
        /usr/bin/sleep "$((RANDOM % (RANKSCOPE_EPILOG_MAX_JITTER + 1)))"
    fi
    [ -r "$RANKSCOPE_TOKEN_FILE" ] || { log "token file $RANKSCOPE_TOKEN_FILE unreadable"; return 0; }
    record="$(/usr/bin/mktemp)" || return 0
    header="$(/usr/bin/mktemp)" || { /usr/bin/rm -f "$record"; return 0; }
    job_record >"$record"
    printf 'Authorization: Bearer %s\nIdempotency-Key: %s\n' \
        "$(/usr/bin/head -c 200 "$RANKSCOPE_TOKEN_FILE" | /usr/bin/tr -d '\r\n ')" \
        "slurmctld-$cluster-$job-$run_key" >"$header"
    local args=(--form-string "cluster=$cluster" --form-string "job_id=$job"
        --form-string "run_key=$run_key" --form-string "stage=controller"
        --form "job=<$record")
    [ -n "$exit_code" ] && args+=(--form-string "exit_code=$exit_code")
    [ -n "$signal" ] && args+=(--form-string "signal=$signal")
    code="$("$CURL" --silent --show-error --output /dev/null --write-out '%{http_code}' \
        --connect-timeout 5 --max-time "$RANKSCOPE_MAX_TIME" \
        --retry "$RANKSCOPE_RETRIES" --retry-delay 2 --retry-max-time "$((RANKSCOPE_MAX_TIME * 2))" \
        --header "@$header" "${args[@]}" \
        "${RANKSCOPE_URL%/}/api/v1/ingest/slurm" 2>/dev/null)"
    /usr/bin/rm -f "$record" "$header"
    log "posted the job record (HTTP ${code:-none})"
    return 0
}

main() {
    local job cluster run_key exit_code="" signal="" raw
    job="$(clean "$SLURM_JOB_ID")"
    cluster="$(clean "$SLURM_CLUSTER_NAME")"
    [ -n "$job" ] && [ -n "$cluster" ] || { log "no SLURM_JOB_ID/SLURM_CLUSTER_NAME"; return 0; }
    [ -n "$RANKSCOPE_URL" ] || { log "RANKSCOPE_URL is not configured"; return 0; }
    run_key="$(clean "${SLURM_JOB_SLUID:-${SLURM_JOB_RESTART_COUNT:-0}}")"
    if [ -n "$SLURM_JOB_EXIT_CODE2" ]; then
        exit_code="${SLURM_JOB_EXIT_CODE2%%:*}"
        signal="${SLURM_JOB_EXIT_CODE2##*:}"
    elif [ -n "$SLURM_JOB_EXIT_CODE" ]; then
        raw=$((SLURM_JOB_EXIT_CODE + 0))
        exit_code=$(((raw >> 8) & 255))
        signal=$((raw & 127))
    fi
    [[ "$exit_code" =~ ^[0-9]+$ ]] || exit_code=""
    [[ "$signal" =~ ^[0-9]+$ ]] || signal=""
    if [ "$RANKSCOPE_EPILOG_FOREGROUND" = "1" ]; then
        send "$job" "$cluster" "$run_key" "$exit_code" "$signal"
    else
        # Detached: its own session, no inherited output, so slurmctld does not wait.
        /usr/bin/setsid /bin/bash "$0" --send "$job" "$cluster" "$run_key" "$exit_code" "$signal" \
            </dev/null >/dev/null 2>&1 &
    fi
    return 0
}

if [ "$1" = "--send" ]; then
    send "$2" "$3" "$4" "$5" "$6"
else
    main
fi
exit 0

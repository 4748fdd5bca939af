#!/bin/bash
# Rankscope EpilogSlurmctld: tell Rankscope the job is over and send its job record.
#
# Install as slurm.conf `EpilogSlurmctld=`; slurmctld runs it once per job, as SlurmUser,
# on the controller. The record (ids, user, name, nodelist, exit codes, output patterns,
# work dir, times, restart count, SLUID) comes from the environment only — no Slurm
# commands. The server expands the nodelist and the output patterns, opens (or finds)
# the job run's incident and starts the analysis without waiting for uploads to settle.
#
# Rules it obeys: always exit 0; the record is first written to a spool directory, then a
# fully detached sender (setsid, no open output) posts it, so the controller never waits
# on the network; curl bounded by --max-time, 429/5xx retried as Retry-After asks within
# RANKSCOPE_RETRY_MAX_SECONDS; a record that could not be sent stays spooled and the next
# job's controller epilog sends it; absolute paths; a short jitter. slurmctld may run this
# twice after a restart: the record is posted with the same bytes and the same
# Idempotency-Key, so the second post changes nothing.
#
# Configuration: /etc/rankscope/epilog.conf (same file as the node Epilog):
#   RANKSCOPE_URL=https://rankscope.example.com
#   RANKSCOPE_TOKEN_FILE=/etc/rankscope/token   # readable by SlurmUser, ingest-only token

umask 077
set +e

RANKSCOPE_EPILOG_CONF="${RANKSCOPE_EPILOG_CONF:-/etc/rankscope/epilog.conf}"
RANKSCOPE_URL=""
RANKSCOPE_TOKEN_FILE="/etc/rankscope/token"
RANKSCOPE_MAX_TIME=30            # seconds for one POST attempt
RANKSCOPE_RETRIES=5              # retries of 429/5xx/no answer, honouring Retry-After
RANKSCOPE_RETRY_MAX_SECONDS=120  # all attempts of one post together
RANKSCOPE_CTLD_SPOOL_DIR="/var/spool/rankscope-slurmctld"   # writable by SlurmUser
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

# --- sender: runs detached; every step is bounded ------------------------------------
# POST with curl; retry what may succeed later — no answer (000), 408, 409 (the same
# Idempotency-Key still in progress), 429 and 5xx — up to RANKSCOPE_RETRIES times, waiting
# what the server asks (Retry-After in seconds) or else 2, 4, 8… s, and never past
# RANKSCOPE_RETRY_MAX_SECONDS in all. The response goes to a temporary file: with
# `--output /dev/null` curl's own --retry fails on many versions ("Failed to truncate
# file"), so the loop is ours and uses only options every curl since 7.55 has.
# Prints the last HTTP status (000: no answer).
http_post() {
    local url="$1" header="$2" out hdrs code attempt=0 wait started ra line
    shift 2
    out="$(/usr/bin/mktemp)" || { printf '000'; return 0; }
    hdrs="$(/usr/bin/mktemp)" || { /usr/bin/rm -f "$out"; printf '000'; return 0; }
    started=$SECONDS
    while :; do
        code="$("$CURL" --silent --show-error --output "$out" --dump-header "$hdrs" \
            --write-out '%{http_code}' --connect-timeout 5 --max-time "$RANKSCOPE_MAX_TIME" \
            --header "@$header" "$@" "$url" 2>/dev/null)"
        [[ "$code" =~ ^[0-9]{3}$ ]] || code=000
        case "$code" in
        000 | 408 | 409 | 429 | 500 | 502 | 503 | 504) ;;
        *) break ;;
        esac
        attempt=$((attempt + 1))
        [ "$attempt" -le "$RANKSCOPE_RETRIES" ] 2>/dev/null || break
        wait=$((2 ** attempt))
        ra=""
        while IFS= read -r line; do
            line="${line%$'\r'}"
            case "${line,,}" in
            retry-after:*)
                ra="${line#*:}"
                ra="${ra//[[:space:]]/}"
                ;;
            esac
        done <"$hdrs"
        # Seconds only; an HTTP-date is ignored and the backoff used instead.
        [[ "$ra" =~ ^[0-9]{1,6}$ ]] && wait=$((10#$ra))
        [ "$wait" -ge 1 ] || wait=1
        if [ $((SECONDS - started + wait)) -gt "$RANKSCOPE_RETRY_MAX_SECONDS" ] 2>/dev/null; then
            log "HTTP $code; no retry: waiting ${wait} s would pass RANKSCOPE_RETRY_MAX_SECONDS"
            break
        fi
        log "HTTP $code; retry $attempt of $RANKSCOPE_RETRIES in ${wait} s"
        /usr/bin/sleep "$wait"
    done
    /usr/bin/rm -f "$out" "$hdrs"
    printf '%s' "$code"
}

# Post one spooled record; 0 when it is delivered (or refused for good) and removed.
send_one() {
    local spool="$1" args=() line name value header code cluster="" job="" run_key=""
    [ -r "$spool/form" ] && [ -r "$spool/job.json" ] || return 0
    while IFS= read -r line; do
        name="${line%%=*}"
        value="${line#*=}"
        case "$name" in
        cluster) cluster="$value" ;;
        job_id) job="$value" ;;
        run_key) run_key="$value" ;;
        esac
        args+=(--form-string "$name=$value")
    done <"$spool/form"
    args+=(--form "job=<$spool/job.json")
    [ -r "$RANKSCOPE_TOKEN_FILE" ] || { log "token file $RANKSCOPE_TOKEN_FILE unreadable; kept $spool"; return 1; }
    header="$(/usr/bin/mktemp)" || return 1
    printf 'Authorization: Bearer %s\nIdempotency-Key: %s\n' \
        "$(/usr/bin/head -c 200 "$RANKSCOPE_TOKEN_FILE" | /usr/bin/tr -d '\r\n ')" \
        "slurmctld-$cluster-$job-$run_key" >"$header"
    code="$(http_post "${RANKSCOPE_URL%/}/api/v1/ingest/slurm" "$header" "${args[@]}")"
    /usr/bin/rm -f "$header"
    case "$code" in
    200 | 202)
        log "posted the job record of $job (HTTP $code)"
        /usr/bin/rm -rf -- "$spool"
        return 0
        ;;
    400 | 401 | 403 | 404 | 413 | 415)
        log "server refused the job record of $job (HTTP $code); dropped"
        /usr/bin/rm -rf -- "$spool"
        return 0
        ;;
    *)
        log "could not post the job record of $job (HTTP ${code:-none}); kept $spool for the next job"
        return 1
        ;;
    esac
}

send_all() {
    local spool="$1" old n=0
    if [ "$RANKSCOPE_EPILOG_FOREGROUND" != "1" ] && [ "$RANKSCOPE_EPILOG_MAX_JITTER" -gt 0 ] 2>/dev/null; then
        /usr/bin/sleep "$((RANDOM % (RANKSCOPE_EPILOG_MAX_JITTER + 1)))"
    fi
    send_one "$spool"
    # Records of earlier jobs that could not be sent (service down): a few per run.
    for old in "$RANKSCOPE_CTLD_SPOOL_DIR"/*; do
        [ -d "$old" ] && [ "$old" != "$spool" ] || continue
        n=$((n + 1))
        [ "$n" -le 20 ] || break
        send_one "$old" || break
    done
    /usr/bin/find "$RANKSCOPE_CTLD_SPOOL_DIR" -mindepth 1 -maxdepth 1 -type d -mtime +7 \
        -exec /usr/bin/rm -rf -- {} + 2>/dev/null
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

    # Spool first: the record survives a service that is down or busy.
    local spool
    /usr/bin/mkdir -p "$RANKSCOPE_CTLD_SPOOL_DIR" || { log "cannot create $RANKSCOPE_CTLD_SPOOL_DIR"; return 0; }
    spool="$(/usr/bin/mktemp -d "$RANKSCOPE_CTLD_SPOOL_DIR/$cluster.$job.$run_key.XXXXXX")" ||
        { log "cannot create a spool directory"; return 0; }
    {
        echo "cluster=$cluster"
        echo "job_id=$job"
        echo "run_key=$run_key"
        echo "stage=controller"
        [ -n "$exit_code" ] && echo "exit_code=$exit_code"
        [ -n "$signal" ] && echo "signal=$signal"
    } >"$spool/form.tmp"
    job_record >"$spool/job.json"
    /usr/bin/mv -f "$spool/form.tmp" "$spool/form"   # complete spools only
    if [ "$RANKSCOPE_EPILOG_FOREGROUND" = "1" ]; then
        send_all "$spool"
    else
        # Detached: its own session, no inherited output, so slurmctld does not wait.
        /usr/bin/setsid /bin/bash "$0" --send "$spool" </dev/null >/dev/null 2>&1 &
    fi
    return 0
}

if [ "$1" = "--send" ]; then
    send_all "$2"
else
    main
fi
exit 0

#!/bin/bash
# Rankscope node Epilog: send this node's evidence of the job that just ended.
#
# Install as (or call from) slurm.conf `Epilog=`; slurmd runs it as root on every node of
# the allocation. It follows every rule a node epilog must obey:
#   * it always exits 0 — a failing epilog drains the node;
#   * the foreground part takes well under a second: it copies the job's node-local logs
#     into a spool directory (read as the job's user, so a symlink planted in the log
#     directory cannot make root send a file the user could not read) and starts a
#     fully detached sender (setsid, stdin/stdout/stderr on /dev/null);
#   * the sender waits a random jitter (every node posts at the same instant), collects
#     a dmesg excerpt and `nvidia-smi -q` (each under `timeout`), and posts everything
#     with curl bounded by --max-time, retrying 429/5xx as the server's Retry-After asks
#     within RANKSCOPE_RETRY_MAX_SECONDS; what could not be sent stays spooled and is
#     retried by the next epilog on this node;
#   * absolute paths only (no PATH is set), output to syslog, no Slurm commands.
#
# Configuration: /etc/rankscope/epilog.conf (a shell fragment, root-owned), e.g.
#   RANKSCOPE_URL=https://rankscope.example.com
#   RANKSCOPE_TOKEN_FILE=/etc/rankscope/token      # an ingest-only token, mode 0600
#   RANKSCOPE_LOG_DIRS="/local/joblogs/%j /tmp/nccl-%j"   # %j job id, %u user, %n node
# See docs/slurm/README.md for every setting.

umask 077
set +e

if [ "$1" != "--send" ]; then
    SELF="$0"
fi

RANKSCOPE_EPILOG_CONF="${RANKSCOPE_EPILOG_CONF:-/etc/rankscope/epilog.conf}"
RANKSCOPE_URL=""
RANKSCOPE_TOKEN_FILE="/etc/rankscope/token"
RANKSCOPE_LOG_DIRS="/var/log/rankscope/jobs/%j"
RANKSCOPE_SPOOL_DIR="/var/spool/rankscope"
RANKSCOPE_MAX_TIME=60            # seconds for one POST attempt
RANKSCOPE_RETRIES=5              # retries of 429/5xx/no answer, honouring Retry-After
RANKSCOPE_RETRY_MAX_SECONDS=300  # all attempts of one post together
RANKSCOPE_EPILOG_MAX_JITTER=15   # seconds; spreads 1,000 nodes over this window
RANKSCOPE_EPILOG_FOREGROUND=0    # 1: send before exiting (tests, debugging)
RANKSCOPE_COLLECT_DMESG=1
RANKSCOPE_COLLECT_NVIDIA_SMI=1
RANKSCOPE_MAX_LOG_MB=512         # per node, compressed archive of the job's logs
RANKSCOPE_EPILOG_LOG=""          # also append messages to this file (besides syslog)
# shellcheck source=/dev/null
[ -r "$RANKSCOPE_EPILOG_CONF" ] && . "$RANKSCOPE_EPILOG_CONF"

CURL=/usr/bin/curl
TIMEOUT=/usr/bin/timeout

log() {
    /usr/bin/logger -t rankscope-epilog -- "job ${SLURM_JOB_ID:-?}: $*" >/dev/null 2>&1
    if [ -n "$RANKSCOPE_EPILOG_LOG" ]; then
        echo "$(/usr/bin/date -u +%FT%TZ) job ${SLURM_JOB_ID:-?} node ${SLURMD_NODENAME:-?}: $*" \
            >>"$RANKSCOPE_EPILOG_LOG" 2>/dev/null
    fi
}

# Expand %j %u %n in a configured path.
expand_pattern() {
    local p="$1"
    p="${p//%j/${SLURM_JOB_ID}}"
    p="${p//%u/${SLURM_JOB_USER}}"
    p="${p//%n/${SLURMD_NODENAME}}"
    printf '%s' "$p"
}

# Only the characters the server accepts in ids and names; anything else becomes '_'.
clean() {
    local v="${1//[^A-Za-z0-9._:+-]/_}"
    printf '%s' "${v:0:120}"
}

# --- foreground: snapshot what the job left on this node, start the sender -------------
collect() {
    local job node cluster run_key raw status_exit status_signal spool dir
    job="$(clean "${SLURM_JOB_ID}")"
    node="$(clean "${SLURMD_NODENAME:-$(/usr/bin/hostname -s 2>/dev/null)}")"
    cluster="$(clean "${SLURM_CLUSTER_NAME}")"
    [ -n "$job" ] && [ -n "$cluster" ] || { log "no SLURM_JOB_ID/SLURM_CLUSTER_NAME; nothing to do"; return 0; }
    [ -n "$RANKSCOPE_URL" ] || { log "RANKSCOPE_URL is not configured"; return 0; }
    run_key="$(clean "${SLURM_JOB_SLUID:-${SLURM_JOB_RESTART_COUNT:-0}}")"

    # SLURM_JOB_EXIT_CODE2 is "exit:signal"; SLURM_JOB_EXIT_CODE is a raw wait status.
    if [ -n "$SLURM_JOB_EXIT_CODE2" ]; then
        status_exit="${SLURM_JOB_EXIT_CODE2%%:*}"
        status_signal="${SLURM_JOB_EXIT_CODE2##*:}"
    elif [ -n "$SLURM_JOB_EXIT_CODE" ]; then
        raw=$((SLURM_JOB_EXIT_CODE + 0))
        status_exit=$(((raw >> 8) & 255))
        status_signal=$((raw & 127))
    fi
    [[ "$status_exit" =~ ^[0-9]+$ ]] || status_exit=""
    [[ "$status_signal" =~ ^[0-9]+$ ]] || status_signal=""

    /usr/bin/mkdir -p "$RANKSCOPE_SPOOL_DIR" || { log "cannot create $RANKSCOPE_SPOOL_DIR"; return 0; }
    spool="$(/usr/bin/mktemp -d "$RANKSCOPE_SPOOL_DIR/$cluster.$job.$run_key.$node.XXXXXX")" ||
        { log "cannot create a spool directory"; return 0; }
    {
        echo "cluster=$cluster"
        echo "job_id=$job"
        echo "run_key=$run_key"
        echo "node=$node"
        echo "stage=node"
        [ -n "$status_exit" ] && echo "exit_code=$status_exit"
        [ -n "$status_signal" ] && echo "signal=$status_signal"
    } >"$spool/form"

    # The job's logs, read as the job's user (never as root), one archive per directory.
    local i=0 as_user=()
    if [ "$(/usr/bin/id -u)" = "0" ] && [ -n "$SLURM_JOB_USER" ] && [ -x /usr/sbin/runuser ]; then
        as_user=(/usr/sbin/runuser -u "$SLURM_JOB_USER" --)
    fi
    for pattern in $RANKSCOPE_LOG_DIRS; do
        dir="$(expand_pattern "$pattern")"
        [ -d "$dir" ] && [ ! -L "$dir" ] || continue
        i=$((i + 1))
        # tar runs as the user; root only writes the archive it streams out.
        "$TIMEOUT" -k 2 20 "${as_user[@]}" /usr/bin/tar -C "$dir" --warning=none -czf - . \
            2>/dev/null | /usr/bin/head -c "$((RANKSCOPE_MAX_LOG_MB * 1024 * 1024))" \
            >"$spool/logs-$i.tar.gz"
        [ -s "$spool/logs-$i.tar.gz" ] || /usr/bin/rm -f "$spool/logs-$i.tar.gz"
    done

    if [ "$RANKSCOPE_EPILOG_FOREGROUND" = "1" ]; then
        send_all "$spool"
    else
        /usr/bin/setsid /bin/bash "$SELF" --send "$spool" </dev/null >/dev/null 2>&1 &
    fi
    log "spooled $spool (${i} log directories)"
    return 0
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

send_one() {
    local spool="$1" args=() line name value f code
    [ -r "$spool/form" ] || return 0
    while IFS= read -r line; do
        name="${line%%=*}"
        value="${line#*=}"
        args+=(--form-string "$name=$value")
    done <"$spool/form"
    for f in "$spool"/*; do
        [ -f "$f" ] && [ "${f##*/}" != "form" ] || continue
        args+=(--form "file=@$f;type=application/octet-stream")
    done
    [ -r "$RANKSCOPE_TOKEN_FILE" ] || { log "token file $RANKSCOPE_TOKEN_FILE unreadable; kept $spool"; return 1; }
    # The token goes in a header file so it never appears in the process list.
    local header
    header="$(/usr/bin/mktemp)" || return 1
    printf 'Authorization: Bearer %s\nIdempotency-Key: %s\n' \
        "$(/usr/bin/head -c 200 "$RANKSCOPE_TOKEN_FILE" | /usr/bin/tr -d '\r\n ')" \
        "epilog-${spool##*/}" >"$header"
    code="$(http_post "${RANKSCOPE_URL%/}/api/v1/ingest/slurm" "$header" "${args[@]}")"
    /usr/bin/rm -f "$header"
    case "$code" in
    200 | 202)
        log "sent $spool (HTTP $code)"
        /usr/bin/rm -rf -- "$spool"
        return 0
        ;;
    400 | 401 | 403 | 404 | 413 | 415)
        # Retrying cannot help; keep nothing that would be retried forever.
        log "server refused $spool (HTTP $code); dropped"
        /usr/bin/rm -rf -- "$spool"
        return 0
        ;;
    *)
        log "could not send $spool (HTTP ${code:-none}); kept for the next epilog"
        return 1
        ;;
    esac
}

send_all() {
    local spool="$1" old n=0
    if [ "$RANKSCOPE_EPILOG_FOREGROUND" != "1" ] && [ "$RANKSCOPE_EPILOG_MAX_JITTER" -gt 0 ] 2>/dev/null; then
        /usr/bin/sleep "$((RANDOM % (RANKSCOPE_EPILOG_MAX_JITTER + 1)))"
    fi
    if [ "$RANKSCOPE_COLLECT_DMESG" = "1" ]; then
        # Kernel messages about GPUs, NICs and memory: Xid, NVRM, mlx5, oom, hung tasks.
        "$TIMEOUT" -k 1 5 /usr/bin/dmesg --time-format iso 2>/dev/null |
            /usr/bin/grep -aiE 'xid|nvrm|nvlink|nvswitch|mlx5|infiniband|ib[0-9]|oom|hung task|mce|pcie|aer' |
            /usr/bin/tail -n 2000 >"$spool/dmesg.txt"
        [ -s "$spool/dmesg.txt" ] || /usr/bin/rm -f "$spool/dmesg.txt"
    fi
    if [ "$RANKSCOPE_COLLECT_NVIDIA_SMI" = "1" ] && [ -x /usr/bin/nvidia-smi ]; then
        # nvidia-smi can hang on a GPU that fell off the bus: bounded like everything else.
        "$TIMEOUT" -k 1 15 /usr/bin/nvidia-smi -q >"$spool/nvidia-smi.txt" 2>&1
    fi
    send_one "$spool"
    # Older spools this node could not send before (service down): a few per run.
    for old in "$RANKSCOPE_SPOOL_DIR"/*; do
        [ -d "$old" ] && [ "$old" != "$spool" ] || continue
        n=$((n + 1))
        [ "$n" -le 5 ] || break
        send_one "$old" || break
    done
    # Give up on evidence nobody could deliver for a week.
    /usr/bin/find "$RANKSCOPE_SPOOL_DIR" -mindepth 1 -maxdepth 1 -type d -mtime +7 \
        -exec /usr/bin/rm -rf -- {} + 2>/dev/null
    return 0
}

if [ "$1" = "--send" ]; then
    send_all "$2"
else
    collect
fi
exit 0

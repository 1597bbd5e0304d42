/**
 * The small POSIX-sh programs the Modal provider runs inside a sandbox. Each is a constant script:
 * every variable part (exec id, the command's argv, paths, nonces) travels as a separate argv
 * entry after `sh -c SCRIPT NAME`, so card text is never spliced into a shell string.
 *
 * Why scripts at all: the SDK has no per-process kill, so a command must run in a process group we
 * can name later (its pgid is written to $TMPDIR/lanes-pg/<execId>), and cancel/timeout must kill that group
 * through a second exec.
 */

/**
 * Where the wrapper records each running command's process group id: `${TMPDIR:-/tmp}/lanes-pg`
 * (honouring TMPDIR lets a sandbox with a private temp dir, like the local Modal server's, keep it there).
 */
const PG_DIR_SH = '${TMPDIR:-/tmp}/lanes-pg';

/** Env var that marks every process of one command, so escapees that left the group are found. */
export const EXEC_MARKER_ENV = 'LANES_EXEC_ID';

/**
 * Runs "$@" as the leader of a new session (so its pgid = its pid), records the pgid, waits,
 * removes the record and exits with the command's status. The shell reports 128+signal for a
 * signalled command, which is the lanes convention. stdin is /dev/null: nothing ever feeds it, and
 * a command that reads stdin must not hang forever.
 *
 * The command runs in the foreground on purpose: a non-interactive shell starts `&` jobs with
 * SIGINT and SIGQUIT ignored, and an ignored signal survives exec, so a backgrounded command could
 * never be interrupted. (The cost: if the SDK's backstop kills this wrapper, the group outlives it;
 * the backstop only fires after our own group kill has failed.)
 *
 * With `end` as its second argument (ExecOptions.endLeftovers: the card's last command), once the
 * command has exited the wrapper kills what it left running before it exits itself: the members of
 * its process group and session, and every process still carrying a marker of this sandbox's
 * commands, its own or an earlier one's (a setup step's daemon). An exec id is `<sandbox id>:<n>`
 * (ModalSandboxHandle), and the sweep matches that prefix only: processes the wrapper can see but
 * another sandbox owns (a local server's sandboxes share a host) are never its to end. A sandbox
 * id of other characters than [A-Za-z0-9_-] sweeps by group and session alone. A daemon that left
 * both and dropped its environment is out of reach: a sandbox-wide kill could reach what Modal
 * itself runs in the container. Ending them here, not in a second exec, also closes the pipes they
 * held, so the command's output ends with it.
 *
 * argv: sh -c WRAP_SCRIPT lanes-exec <execId> <end|keep> <argv...>
 */
export const WRAP_SCRIPT = [
  `d="${PG_DIR_SH}"; f="$d/$1"; id="$1"; leftovers="$2"; shift 2`,
  // The shell's own job reports ("Killed") must not pose as the command's stderr: the wrapper's
  // fd 2 goes nowhere and the command writes to the original stderr through fd 3. The subshell +
  // exec matters: dash prints a job report through the command's own redirections.
  'exec 3>&2 2>/dev/null',
  'mkdir -p "$d" || exit 125',
  'command -v setsid >/dev/null 2>&1 || { echo "lanes: setsid is missing from the sandbox image" >&3; exit 127; }',
  `(${EXEC_MARKER_ENV}="$id" exec setsid sh -c 'f="$1"; shift; echo $$ > "$f.tmp" && mv -f "$f.tmp" "$f"; exec "$@"' lanes "$f" "$@" </dev/null 2>&3 3>&-)`,
  'rc=$?',
  'if [ "$leftovers" = end ]; then',
  '  pg=; [ -s "$f" ] && read -r pg 2>/dev/null < "$f"',
  '  case "$pg" in ""|*[!0-9]*) pg= ;; esac',
  '  [ -n "$pg" ] && kill -s KILL -- -"$pg" 2>/dev/null',
  // Its session's members that moved to a group of their own (fields after "comm)": state ppid pgrp session).
  '  if [ -n "$pg" ]; then for s in /proc/[0-9]*/stat; do read -r l 2>/dev/null < "$s" || continue; l=${l##*) }; set -- $l; [ "$4" = "$pg" ] && { p=${s#/proc/}; kill -s KILL "${p%/stat}" 2>/dev/null; }; done; fi',
  '  sb="${id%%:*}"; [ "$sb" = "$id" ] && sb=',
  '  case "$sb" in ""|*[!A-Za-z0-9_-]*) sb= ;; esac',
  `  [ -n "$sb" ] && for e in $(grep -lsz "^${EXEC_MARKER_ENV}=$sb:" /proc/[0-9]*/environ 2>/dev/null); do p=\${e#/proc/}; kill -s KILL "\${p%/environ}" 2>/dev/null; done`,
  'fi',
  'rm -f "$f" "$f.tmp"',
  'exit "$rc"',
].join('\n');

/**
 * Kills one command's process tree: SIGINT to its group, then (after a grace period, or as soon as
 * the group is gone) SIGTERM and finally SIGKILL to the group, its session, and any process still
 * carrying the command's marker env var (escaped with setsid/setpgid). Zombies are not "alive".
 * Exits 0 when nothing of the command is left, 1 otherwise.
 *
 * A cancel can race the start of the command: the script first waits up to one grace period for
 * the pgid record to appear.
 *
 * argv: sh -c KILL_SCRIPT lanes-kill <execId> <graceMs>
 */
export const KILL_SCRIPT = [
  `id="$1"; f="${PG_DIR_SH}/$1"`,
  // The grace in seconds for sleep(1), e.g. 200 → 0.200.
  'g=$(( $2 + 0 )); gs="$((g / 1000)).$(printf %03d $((g % 1000)))"',
  // Bounded by wall time (a background sleep), not by iterations whose cost varies with /proc size.
  // (The iteration cap only matters for a shell that leaves the finished sleep unreaped.)
  'within() { sleep "$gs" & t=$!; n=0; while kill -0 "$t" 2>/dev/null && [ "$n" -lt $((g / 50 + 2)) ] && "$@"; do sleep 0.05; n=$((n+1)); done; kill "$t" 2>/dev/null; wait "$t" 2>/dev/null; }',
  'unrecorded() { [ ! -s "$f" ]; }',
  'within unrecorded',
  'pg=; [ -s "$f" ] && read -r pg 2>/dev/null < "$f"',
  'case "$pg" in ""|*[!0-9]*) pg= ;; esac',
  // Live members of the command's group or session (fields after "comm)": state ppid pgrp session).
  'members() {',
  '  [ -n "$pg" ] || return 0',
  '  for d in /proc/[0-9]*; do',
  '    read -r s 2>/dev/null < "$d/stat" || continue',
  '    s=${s##*) }; set -- $s',
  '    [ "$1" = Z ] && continue',
  '    if [ "$3" = "$pg" ] || [ "$4" = "$pg" ]; then echo "${d#/proc/}"; fi',
  '  done',
  '}',
  // Processes that left the group and session but still carry the marker (one grep for all).
  'escaped() {',
  `  for e in $(grep -lsxz "${EXEC_MARKER_ENV}=$id" /proc/[0-9]*/environ 2>/dev/null); do`,
  '    p=${e#/proc/}; echo "${p%/environ}"',
  '  done',
  '}',
  'running() { [ -n "$(members)" ]; }',
  'settle() { within running; }',
  'everyone() { sig="$1"; [ -n "$pg" ] && kill -s "$sig" -- -"$pg" 2>/dev/null; for p in $(members) $(escaped); do kill -s "$sig" "$p" 2>/dev/null; done; }',
  '[ -n "$pg" ] && kill -s INT -- -"$pg" 2>/dev/null',
  'settle',
  'if [ -n "$(members)$(escaped)" ]; then everyone TERM; settle; fi',
  'if [ -n "$(members)$(escaped)" ]; then everyone KILL; settle; fi',
  '[ -z "$(members)$(escaped)" ]',
].join('\n');

/**
 * The connect canary: proves the sandbox runs commands, has what the wrapper needs, and creates the
 * lanes workdir. Prints the nonce on success; exits 127 when the image lacks sh/setsid.
 *
 * argv: sh -c CANARY_SCRIPT lanes-canary <workdir> <nonce>
 */
export const CANARY_SCRIPT = [
  'command -v setsid >/dev/null 2>&1 || { echo "lanes: setsid is missing from the sandbox image" >&2; exit 127; }',
  `mkdir -p "$1" "${PG_DIR_SH}" || exit 1`,
  'printf "%s\\n" "$2"',
].join('\n');

/**
 * Reads a file an agent left (result.json, blocked.json) in one command, bounded by construction.
 * Walks from the workdir down, refusing a link on any component, refuses anything but a regular
 * file, opens it once, and from then on reads only that descriptor: a file swapped after the walk
 * cannot turn the read into a FIFO that blocks it or a device that never ends. Prints one verdict
 * line, `missing` | `link <component>` | `type <what>` | `unreadable` | `changed` | `size <bytes>`,
 * and after `size` within the cap, the file's first cap + 1 bytes in base64 on one line (+ 1, so
 * a file that grew after its size was taken still reads as too large).
 *
 * Why the second walk and `-ef` after the open: a link swapped in just before the open (and still
 * there, or gone with another file in its place) is caught; only one swapped in and out again
 * within that moment is not, and even then lanes reads a regular file, no more than cap + 1 bytes.
 * A FIFO swapped in before the open blocks the open itself; the command's deadline ends that.
 *
 * argv: sh -c READ_FILE_SCRIPT lanes-read-file <workdir> <path below it, relative> <cap bytes>
 */
export const READ_FILE_SCRIPT = [
  'root="$1"; rel="$2"; cap="$3"',
  // Without one of these the read would come back empty or garbled, not fail.
  'for t in wc head base64 tr; do command -v "$t" >/dev/null 2>&1 || { echo "lanes: $t is missing from the sandbox image" >&2; exit 127; }; done',
  // kind F: what F is when it is not a regular file; silent for a regular file. Never opens F. Each
  // test is a stat of its own, so a path swapped between them may match none: it changed under us.
  'kind() {',
  '  if [ -p "$1" ]; then echo "a FIFO"; elif [ -d "$1" ]; then echo "a directory"; elif [ -S "$1" ]; then echo "a socket"',
  '  elif [ -c "$1" ]; then echo "a character device"; elif [ -b "$1" ]; then echo "a block device"; elif [ ! -f "$1" ]; then echo "changing or of no known type"; fi',
  '}',
  'refused() { k=$(kind "$1"); [ -n "$k" ] && echo "type $k"; }',
  // walk: p becomes the path; a link on any component, or a missing one, is the verdict (status 1).
  'walk() {',
  '  p="$root"; IFS=/; set -f',
  '  for c in $rel; do',
  '    p="$p/$c"',
  '    if [ -L "$p" ]; then printf "link %s\\n" "$c"; return 1; fi',
  '    if [ ! -e "$p" ]; then echo missing; return 1; fi',
  '  done',
  '  unset IFS; set +f',
  '}',
  'walk || exit 0',
  'refused "$p" && exit 0',
  // A failed redirection of a group does not end the shell: the lines after it say why.
  '{',
  '  walk || exit 0',
  '  refused /proc/self/fd/3 && exit 0',
  '  [ /proc/self/fd/3 -ef "$p" ] || { echo changed; exit 0; }',
  // A fresh open of the same file (through /proc), so the descriptor's offset stays at 0.
  '  n=$(wc -c < /proc/self/fd/3)',
  '  printf "size %s\\n" "$n"',
  '  [ "$n" -gt "$cap" ] && exit 0',
  '  head -c $((cap + 1)) <&3 | base64 | tr -d "\\n"',
  '  exit',
  '} 3< "$p"',
  'if [ -e "$p" ]; then echo unreadable; else echo missing; fi',
].join('\n');

export function readFileArgv(workdir: string, relative: string, maxBytes: number): string[] {
  return ['sh', '-c', READ_FILE_SCRIPT, 'lanes-read-file', workdir, relative, String(maxBytes)];
}

export function wrapArgv(execId: string, argv: readonly string[], endLeftovers = false): string[] {
  return ['sh', '-c', WRAP_SCRIPT, 'lanes-exec', execId, endLeftovers ? 'end' : 'keep', ...argv];
}

export function killArgv(execId: string, graceMs: number): string[] {
  return ['sh', '-c', KILL_SCRIPT, 'lanes-kill', execId, String(Math.max(1, Math.round(graceMs)))];
}

export function canaryArgv(workdir: string, nonce: string): string[] {
  return ['sh', '-c', CANARY_SCRIPT, 'lanes-canary', workdir, nonce];
}

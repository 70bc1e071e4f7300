#!/usr/bin/env bash
# Here, after a call of scripts/drift_resume_call.sh: unpack its tarball parts from the call's files
# folder into DEST (the committed in-progress study folder) and refresh drift-carry/ for the next
# call (a call killed at its limit: its newest whole snapshot, then a refit of DEST from the
# checkpoints, scripts/drift_refit.py). Appends the call's log to DEST/log.txt.
# Usage: bash scripts/drift_unpack.sh FILES_AT DEST
set -euo pipefail
FILES=${1:?the call files folder, e.g. /work/.device/3}
DEST=${2:?destination folder under results/drift/}
TMP=$(mktemp -d)
# the call's final tarball, or (a call killed at its limit) its newest whole snapshot
for SRC in "$FILES" "$FILES/snap" "$FILES/snap.old"; do
  if ls "$SRC"/d.part.* >/dev/null 2>&1 && cat "$SRC"/d.part.* | tar xzf - -C "$TMP" 2>/dev/null; then break; fi
  rm -rf "${TMP:?}"/*
done
[ -d "$TMP/runs" ] || { echo "no whole tarball or snapshot under $FILES" >&2; exit 2; }
mkdir -p "$DEST"
rm -rf "$DEST/runs"
cp -r "$TMP/runs" "$DEST/"
if [ -f "$TMP/note.md" ]; then
  cp "$TMP/note.md" "$TMP/summary.json" "$DEST/"
else  # a snapshot of a killed call: its files may be mid-write; the refit drops a torn checkpoint line
  echo "from the snapshot of a killed call ($SRC): refitting from the checkpoints"
  python3 scripts/drift_refit.py "$DEST" >/dev/null
fi
{ echo "=== call $(basename "$FILES")"; cat "$FILES/log.txt"; } >> "$DEST/log.txt"
rm -rf drift-carry/runs && mkdir -p drift-carry && cp -r "$TMP/runs" drift-carry/
rm -rf "$TMP"
echo "unpacked into $DEST; drift-carry/runs refreshed"

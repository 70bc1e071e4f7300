#!/usr/bin/env bash
# Here, after a call of h200_drift_resume.sh: unpack its tarball parts from the call's files
# folder into DEST (the committed in-progress study folder) and refresh drift-carry/ for the next
# call. Appends the call's log to DEST/log.txt. Usage: bash scripts/drift_unpack.sh FILES_AT DEST
set -euo pipefail
FILES=${1:?the call files folder, e.g. /work/.device/3}
DEST=${2:?destination folder under results/drift/}
TMP=$(mktemp -d)
cat "$FILES"/d.part.* | tar xzf - -C "$TMP"
mkdir -p "$DEST"
rm -rf "$DEST/runs"
cp -r "$TMP/runs" "$DEST/"
cp "$TMP/note.md" "$TMP/summary.json" "$DEST/"
{ echo "=== call $(basename "$FILES")"; cat "$FILES/log.txt"; } >> "$DEST/log.txt"
rm -rf drift-carry/runs && mkdir -p drift-carry && cp -r "$TMP/runs" drift-carry/
rm -rf "$TMP"
echo "unpacked into $DEST; drift-carry/runs refreshed"

#!/usr/bin/env bash
# Downloads Google's public Edge TPU test models, images, labels and expected results (the files listed
# in scripts/testdata_manifest.tsv) from their public GitHub origins into a folder, checking every
# sha256. Then point the tests and the CLI at it:  export TINYCORAL_TESTDATA=<folder>
# Usage: scripts/download_testdata.sh [FOLDER]   (default: ./testdata; needs curl and internet)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:-testdata}
manifest="$here/testdata_manifest.tsv"
command -v curl >/dev/null || { echo "download_testdata: curl is needed (apt-get install curl)" >&2; exit 2; }
mkdir -p "$dest"
failed=0
total=0
while IFS=$'\t' read -r file bytes sha origin; do
  [ "$file" = "file" ] && continue
  total=$((total + 1))
  target="$dest/$file"
  if [ -f "$target" ] && [ "$(sha256sum "$target" | cut -d' ' -f1)" = "$sha" ]; then
    continue
  fi
  repo=${origin%%@*}
  rest=${origin#*@}
  commit=${rest%%:*}
  path=${rest#*:}
  mkdir -p "$(dirname "$target")"
  echo "[$total] $file ($bytes bytes) from $repo"
  if ! curl -fsSL --retry 3 -o "$target.part" "https://raw.githubusercontent.com/$repo/$commit/$path"; then
    echo "download_testdata: could not fetch $origin" >&2
    failed=$((failed + 1)); rm -f "$target.part"; continue
  fi
  got=$(sha256sum "$target.part" | cut -d' ' -f1)
  if [ "$got" != "$sha" ]; then
    echo "download_testdata: $file: sha256 $got, expected $sha (file not kept)" >&2
    failed=$((failed + 1)); rm -f "$target.part"; continue
  fi
  mv "$target.part" "$target"
done < "$manifest"
cp "$manifest" "$dest/MANIFEST.tsv"
echo "$((total - failed)) of $total files in $dest"
[ "$failed" -eq 0 ] || exit 1
echo "export TINYCORAL_TESTDATA=$(cd "$dest" && pwd)"

# fetch.sh: sourced by the data/prepare_*.sh scripts that download a corpus.
# fetch URL DEST: download once, to a temporary name first, so an interrupted download
# never looks complete.
fetch() {
    [ -s "$2" ] && return 0
    mkdir -p "$(dirname "$2")"
    if ! curl -fL --progress-bar --connect-timeout 10 --retry 2 -o "$2.part" "$1"; then
        rm -f "$2.part"
        echo "error: cannot download $1 (offline? data/prepare_bible.sh needs no internet)" >&2
        exit 1
    fi
    mv "$2.part" "$2"
}

sh -c 'f=$(mktemp); dd if=/dev/zero of=$f bs=1 count=6 2>/dev/null; echo "bytes in the file: $(wc -c < $f)"; rm -f $f'

/bin/true a "b c"

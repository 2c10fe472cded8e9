# parse a list like [1, 2, 3]; prints the items one per line
echo "$1" | tr -d '[] ' | tr ',' '\n' | sed 's/^$/<empty item>/'

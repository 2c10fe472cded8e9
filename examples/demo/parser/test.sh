#!/bin/sh
# The validator: trailing commas must not yield an empty item.
got=$(sh parse.sh '[1, 2,]' | tr '\n' ' ')
if [ "$got" != "1 2 " ]; then
  echo "FAIL: parse '[1, 2,]' = '$got', want '1 2 '"
  exit 1
fi
echo "ok"

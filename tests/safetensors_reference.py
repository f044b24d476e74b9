"""Decides every file of a directory with the reference safetensors package.

Usage: python3 safetensors_reference.py DIR
Prints one line per file, in sorted order: "NAME ok" when
safetensors.deserialize accepts the file's bytes, "NAME err MESSAGE"
otherwise. Exit status 3 when the package cannot be imported (the caller
then skips visibly). Used by tests/test_safetensors_reference.c.
"""
import os
import sys

try:
    import safetensors
except ImportError as e:
    print("cannot import safetensors: %s" % e)
    sys.exit(3)


def main():
    d = sys.argv[1]
    print("safetensors %s" % safetensors.__version__)
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        try:
            safetensors.deserialize(data)
            print("%s ok" % name)
        except Exception as e:  # the reference's verdict, whatever its type
            msg = str(e).replace("\n", " ")[:200]
            print("%s err %s" % (name, msg))


main()

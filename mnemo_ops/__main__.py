"""Allow `python -m mnemo_ops`."""

from mnemo_ops.cli import main

if __name__ == "__main__":
    main()

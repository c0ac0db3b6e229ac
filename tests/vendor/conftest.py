"""Put the fixture device and group modules of this directory on sys.path (child processes inherit it)."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

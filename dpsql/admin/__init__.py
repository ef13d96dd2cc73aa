"""Tools for the data owner that read raw data; never reachable from an analyst connection."""

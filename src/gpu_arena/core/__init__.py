"""The arena's pure core: the economy's rules, valuations and views (no I/O, no wire types)."""

from .native import load_compiled

# first, before any module imports a kernel: each kernel's compiled build where one matches its
# source (then every import of it gets that module), else the source
load_compiled()

"""``python -m gpu_arena.cli``: the ``gpu-arena`` command."""

from .app import main

if __name__ == "__main__":  # not when multiprocessing's spawn imports it as __mp_main__
    main()

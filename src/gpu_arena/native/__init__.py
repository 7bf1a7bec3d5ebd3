"""The Rust engine (``native/`` of the repository, decision 0026) as the package sees it: its build
and its loader, whether it may play, and the core ``Episode``'s interface over it.

* :mod:`.loader` loads the build only while it is the crate as it is (``make install`` builds it);
* :mod:`.twin` says whether the crate is a port of the Python core as it is (``native/mirrors.json``)
  and warns where it is not;
* :mod:`.episode` is :class:`~gpu_arena.native.episode.NativeEpisode`, the episode played in Rust;
* :mod:`.report` is :class:`~gpu_arena.native.report.EngineReport`: which engine played an
  episode and why the Python core did, with the fixed reasons rows are counted by;
* :mod:`.build` compiles the crate and writes the manifest (``python -m gpu_arena.native.build``,
  ``make install`` and ``make native-sync``).

The pure core (``gpu_arena.core``) never imports this package; the environment does.
"""

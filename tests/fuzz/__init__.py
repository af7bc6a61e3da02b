"""The fuzz harness: Hypothesis mutates valid inputs of every loader and command of memsim, and
each case runs memsim's console entry point in a fresh folder against the error contract (exit
0, or exit 2 with one line ``memsim: error: ...`` and nothing left in ``--out``).

``python -m tests.fuzz`` runs a campaign (``campaign.main``); its tests are in this package
(marker ``fuzz``). Modules: ``vocab`` (the names read from memsim's registries), ``mutate``
(mutations of any document), ``inputs``, ``commands``, ``binary`` and ``hostile`` (the kinds),
``run`` (one command, isolated and judged), ``campaign`` (drawing, tallying, reports).
"""

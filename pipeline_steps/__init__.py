"""Pipeline steps (audit, gate, deploy), report rendering and the ``certgate`` CLI."""

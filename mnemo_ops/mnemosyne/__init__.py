"""The one door to Mnemosyne: the only room that imports the ``mnemosyne`` package or the Hermes
plugin (``mnemosyne_hermes``); everything else asks it.

- `api`: Mnemosyne opened in a contained way (the schema-change guard, the environment a child
  needs, the connections closed after), and the schema facts the jobs rely on;
- `versions` and `version_probe`: the supported Mnemosyne lines, which line wrote a database, and
  the check before a job opens it;
- `worker`: the child process the recall engines talk to (recall, the Hermes plugin's prefetch,
  store, explain);
- `embedding`, `vectors`, `vector_worker`: Mnemosyne's dense vectors, counted and repaired;
- `sample_home`: the demo's home, written through Mnemosyne's own API.

Why children: importing Mnemosyne has side effects that follow the environment (its data folder,
its config), so the code that imports it runs in a child process whose environment was set first
(``foundation.child_process``).
"""

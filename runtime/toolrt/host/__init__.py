"""The Runtime's parts that are objects of their own (the Runtime itself is `toolrt.api`).

```
sessions    `rt.sessions`: the sessions a Runtime holds, and what of them is kept between processes
turns       several calls at once: `parallel` tools side by side; a model turn's calls and their results
deprecated  the Runtime's 0.2 names of what moved, kept one release with a DeprecationWarning
```
"""

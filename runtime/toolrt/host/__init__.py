"""The Runtime's parts that are objects of their own (the Runtime itself is `toolrt.api`).

```
sessions    `rt.sessions`: the sessions a Runtime holds, and what of them is kept between processes
deprecated  the Runtime's 0.2 names of what moved, kept one release with a DeprecationWarning
```
"""

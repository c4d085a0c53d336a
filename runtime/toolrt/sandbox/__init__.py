"""The OS sandbox around every process toolrt starts: policy from config, Landlock and namespaces on
Linux (bubblewrap where Landlock is missing), Seatbelt profiles for macOS.

`policy` says what a process may do and how config layers combine (tighten-only from the project);
`support` finds what the kernel can enforce; `plan` turns a policy into what the kernel is told for
one process; `kernel` makes the system calls; `forkserver` / `launcher` start processes for users
whose namespaces need a user namespace; `hint` explains a refusal in one line.
"""

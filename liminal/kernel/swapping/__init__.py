"""The swap as a machine without I/O: what a thread's swaps keep (``book``), what the swap is
told and what it asks for (``steps``), the decisions at a thread's turn ends and idle spells
(``machine``), and one swap from its look at the session file to its commit (``run``).
``liminal.kernel.swap`` drives them: it feeds them events and carries out their commands."""

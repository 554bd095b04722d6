FAULT_ROWS = "rr-fault-rows"
"""The ``user_properties`` key under which a fault test's report carries the rows of the fault
runs it made (tests/faults/conftest.py), for the summary tests/conftest.py prints."""

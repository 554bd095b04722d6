"""The transport port and its adapters."""

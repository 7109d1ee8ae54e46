"""Fake provider endpoints as strict as the real APIs, served over loopback HTTP to the real SDKs."""

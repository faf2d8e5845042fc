"""Test doubles that speak the real protocols (no mocks): the test kubelet."""

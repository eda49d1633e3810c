"""The scenario catalog: entries as data and the functions that build and run them."""

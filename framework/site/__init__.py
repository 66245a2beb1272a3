"""Static HTML lake writes for people: the docs site (`lake docs`) and the SVG it draws with; and the
generated reference pages of lake's own manual (reference.py, yaml_keys.py; `make docs`)."""

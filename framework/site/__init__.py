"""Static HTML lake writes for people: the docs site (`lake docs`) and the SVG it draws with."""

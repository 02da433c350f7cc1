"""`python -m tileiras ...` runs the `tileiras` compiler driver (the same as the console script)."""

from tileiras.driver.tileiras_main import main

main()

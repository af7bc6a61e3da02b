"""The core every layer may use: quantities and exact time, the error family, atomic writes, strict
file reading, the input limits, the registry type, preset lookup, data types and the process pools."""

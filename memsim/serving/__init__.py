"""Serving: requests arriving at a deployment. The declared ``ServeSpec``, the step times, the loop's
setup and what a serving run reports."""

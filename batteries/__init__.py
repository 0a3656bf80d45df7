"""The battery: one test module per claim, parametrized over the fleet by the plugin."""
